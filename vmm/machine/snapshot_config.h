// The machine's configuration in a snapshot (its "config" section): what the guest can see
// (RAM, vCPUs, the PIT and its tick delivery, the lost-tick policy, the CPU model and mask, the
// console kind, the drives with their sizes, the NICs, the test devices), and how a restore
// merges it with the command line (docs/snapshot.md, "Restoring").
//
// The command line may add only the host's business (--api-socket, --stats, --seccomp, the
// alarm and poll back-ends, affinity, logging, console input, --duration). A guest-visible
// option it also gives must say what the snapshot says: anything else is a usage error.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/machine/config.h"

namespace minivmm::vmm {

// The guest-visible options the user gave on a `run --restore` command line, by name
// ("--pit-tick"), as the CLI registered them.
using GivenOptions = std::set<std::string>;

// Every guest-visible option this record and a restore know, by the CLI's name: the rows of
// guest_options.h, then --drive, --net and --share (rules of their own). run_cli.h's
// add_guest_options registers exactly these (tests/unit/vmm/cli/guest_options_test.cc).
std::vector<std::string_view> guest_visible_options();

// `drive_sizes[i]`: --drive i's size in bytes when the snapshot was taken.
std::vector<std::uint8_t> save_machine_config(const Config& config,
                                              const std::vector<std::uint64_t>& drive_sizes);

struct SavedMachine {
  Config config;  // the guest-visible fields as saved; the rest default
  std::vector<std::uint64_t> drive_sizes;
};
// Throws devices::StateError for a record that is not a configuration this minivmm can run.
SavedMachine load_machine_config(std::span<const std::uint8_t> record);

// `user`: the command line's Config; its guest-visible fields become the snapshot's. Drives
// may be renamed by `restore_drives` (index -> path, --restore-drive N=PATH); NICs given again
// with --net replace the saved back-ends (same count; their MACs stay the snapshot's). Returns
// the contradiction, or nullopt when the two agree.
std::optional<std::string> merge_restored_config(
    Config& user, const GivenOptions& given, const SavedMachine& saved,
    const std::vector<std::pair<std::size_t, std::string>>& restore_drives);

}  // namespace minivmm::vmm
