// What the user gave the run to boot, checked and loaded before /dev/kvm is opened, so a bad
// input gets its own exit code on any machine: the guest's RAM with the kernel (and initrd)
// loaded into it, and the --drive files opened (and locked). The kernel and initrd files are
// mapped while they load and let go after (vmm/host/mapped_file.h); the drive files are handed
// to their virtio-blk devices.
#pragma once

#include <string>
#include <vector>

#include "devices/host/block_file.h"
#include "vmm/boot/loaded_kernel.h"
#include "vmm/kvm/guest_ram_mapping.h"
#include "vmm/machine/config.h"

#include "vmm/snapshot/snapshot_file.h"

namespace minivmm::vmm {

struct BootInputs {
  // Throws VmmError: kBadKernel for a bad image or drive file, kUsage for a good kernel that
  // needs more RAM or a shorter command line than the configuration gives.
  // With `restore`, nothing is loaded: RAM is the snapshot's, mapped copy-on-write, and each
  // drive must still have the size the snapshot recorded (VmmError kBadKernel otherwise).
  explicit BootInputs(const Config& config, const SnapshotFile* restore = nullptr,
                      const std::vector<std::uint64_t>& drive_sizes = {});

  GuestRamMapping ram;
  LoadedKernel kernel;
  std::vector<devices::BlockFile> drives;
};

// The guest's command line: the user's, then the virtio-mmio devices, which Linux finds only
// there on x86 (no discovery). Their layout depends only on how many there are, so it is known
// before the kernel is loaded, which happens before KVM exists.
std::string boot_cmdline(const Config& config);

}  // namespace minivmm::vmm
