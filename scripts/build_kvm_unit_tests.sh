#!/usr/bin/env bash
# Fetch and build kvm-unit-tests' x86 suite OUTSIDE this repository, where tests/CMakeLists.txt
# and docs/kvm-unit-tests.md expect it (default ~/.cache/kvm-unit-tests). Nothing of the suite
# is ever copied into the project: it is the suite's own code, built by its own configure/make.
#
#   scripts/build_kvm_unit_tests.sh [SOURCE] [DEST]
#
# SOURCE is anything `git clone` accepts: the suite's address (the default) or a local mirror
# such as a bare git directory when this machine cannot reach GitHub/GitLab. DEST defaults to
# $MINIVMM_KVM_UNIT_TESTS_DIR or ~/.cache/kvm-unit-tests. An existing checkout is reused and
# only rebuilt. Afterwards re-run cmake so the `kvm-unit-tests` ctest label is registered.
set -euo pipefail

src=${1:-https://gitlab.com/kvm-unit-tests/kvm-unit-tests.git}
dest=${2:-${MINIVMM_KVM_UNIT_TESTS_DIR:-$HOME/.cache/kvm-unit-tests}}

for tool in git gcc make; do
  command -v "$tool" >/dev/null || { echo "build_kvm_unit_tests: $tool is missing" >&2; exit 1; }
done

if [[ ! -e $dest/configure ]]; then
  mkdir -p "$(dirname "$dest")"
  git clone -q "$src" "$dest"
fi
cd "$dest"
# The suite's defaults build the x86_64 tests; -Werror is its own choice and stays.
[[ -e config.mak ]] || ./configure
make -j"$(nproc)" >/dev/null
n=$(find x86 -maxdepth 1 -name "*.flat" | wc -l)
echo "build_kvm_unit_tests: $n x86 test binaries in $dest/x86 ($(git log -1 --format='%h %cs'))"
