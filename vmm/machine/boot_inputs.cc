#include "vmm/machine/boot_inputs.h"

#include "vmm/boot/guest_kernel_loader.h"
#include "vmm/host/mapped_file.h"
#include "vmm/machine/pc_board.h"
#include "vmm/machine/virtio_mmio_devices.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

LoadedKernel load_kernel_and_initrd(const Config& config, const GuestRamMapping& ram) {
  // The kernel file may be larger than RAM (an ELF vmlinux carries its symbols, which are not
  // loaded); 3 GiB bounds any file. An initrd goes whole into guest RAM, so RAM bounds it.
  const MappedFile kernel =
      MappedFile::open("--kernel", config.kernel_path, ExitCode::kBadKernel,
                       {GuestRamMapping::kMaxBytes, ExitCode::kBadKernel, "the largest guest RAM"});
  MappedFile initrd;
  if (!config.initrd_path.empty()) {
    // Too big for RAM is a question of --memory, not a bad file.
    initrd = MappedFile::open("--initrd", config.initrd_path, ExitCode::kBadKernel,
                              {config.memory_bytes, ExitCode::kUsage, "the guest RAM (--memory)"});
  }
  const std::string cmdline = boot_cmdline(config);
  const TruncationGuard guard{&kernel, &initrd};
  // The CLI says this in its own words; a Config from elsewhere (minivmm exec) must not reach
  // the board's table of GSIs with a device it has no slot for.
  if (config.virtio_devices() > board::kVirtioGsis.size()) {
    throw VmmError(ExitCode::kUsage, "at most " + std::to_string(board::kVirtioGsis.size()) +
                                         " virtio devices, not " +
                                         std::to_string(config.virtio_devices()));
  }
  LoadedKernel k;
  try {
    std::vector<AcpiMmioDevice> acpi_virtio;
    for (std::size_t i = 0; config.virtio_in_acpi && i < config.virtio_devices(); ++i) {
      const board::Window w = board::virtio_window(i);
      acpi_virtio.push_back({static_cast<std::uint32_t>(w.base),
                             static_cast<std::uint32_t>(w.size), board::kVirtioGsis.at(i)});
    }
    k = load_guest_kernel(ram.memory(), kernel.bytes(), cmdline, initrd.bytes(), config.cpus,
                          config.kernel_path, board_port_of("pvpanic"),
                          board_port_of("acpi_pm"), std::move(acpi_virtio));
  } catch (const VmmError& e) {
    if (e.code() != ExitCode::kUsage || cmdline.size() == config.cmdline.size() ||
        std::string(e.what()).rfind("--cmdline", 0) != 0) {
      throw;
    }
    // The user's words fit on their own: say what minivmm added to them.
    throw VmmError(ExitCode::kUsage,
                   std::string(e.what()) + " (" +
                       std::to_string(cmdline.size() - config.cmdline.size()) +
                       " bytes of it are the virtio_mmio.device= words for the virtio devices)");
  }
  if (const MappedFile* f = guard.truncated()) {
    throw VmmError(ExitCode::kBadKernel, "'" + f->path() + "' shrank while it was being loaded");
  }
  return k;  // the mappings go here: guest RAM holds what the guest needs
}

std::vector<devices::BlockFile> open_drives(const Config& c,
                                            const std::vector<std::uint64_t>& sizes) {
  std::vector<devices::BlockFile> files;
  for (const DriveSpec& d : c.drives) {
    try {
      files.push_back(devices::BlockFile::open(d.path, d.read_only));
    } catch (const devices::BlockFileError& e) {
      throw VmmError(ExitCode::kBadKernel, e.what());
    }
    // A restored guest has the disk's size in its memory (virtio-blk's capacity, the page
    // cache): another size is another disk.
    const std::size_t i = files.size() - 1;
    if (i < sizes.size() && files.back().size_bytes() != sizes[i]) {
      throw VmmError(ExitCode::kBadKernel,
                     "--restore: drive " + std::to_string(i) + " '" + d.path + "' is " +
                         std::to_string(files.back().size_bytes()) +
                         " bytes; the snapshot's was " + std::to_string(sizes[i]));
    }
  }
  return files;
}

}  // namespace

std::string boot_cmdline(const Config& c) {
  const std::string devices =
      c.virtio_in_acpi ? std::string() : VirtioMmioDevices::cmdline_for(c.virtio_devices());
  if (devices.empty()) return c.cmdline;
  return c.cmdline.empty() ? devices : c.cmdline + " " + devices;
}

BootInputs::BootInputs(const Config& config, const SnapshotFile* restore,
                       const std::vector<std::uint64_t>& drive_sizes)
    : ram(restore ? GuestRamMapping(restore->fd.get(), restore->meta.memory_offset,
                                    restore->meta.memory_bytes)
                  : GuestRamMapping(config.memory_bytes)),
      kernel(restore ? LoadedKernel{} : load_kernel_and_initrd(config, ram)),
      drives(open_drives(config, drive_sizes)) {}

}  // namespace minivmm::vmm
