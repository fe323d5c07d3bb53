// Must not compile (tests/compile_fail/CMakeLists.txt, issue 34): a board device that declares
// no snapshot participation, mounted the way a board slot mounts one. With -DDECLARED it
// declares itself stateless and compiles, so the failure is the missing declaration's.
#include <string_view>

#include "devices/bus/device_state.h"

struct ScratchDevice {
#ifdef DECLARED
  static constexpr std::string_view kStatelessBecause = "a compile test's device";
#endif
};

int main() {
  ScratchDevice d;
  return minivmm::devices::participation_of(d).declared() ? 0 : 1;
}
