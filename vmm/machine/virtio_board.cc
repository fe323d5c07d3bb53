#include "vmm/machine/virtio_board.h"

#include <string>

#include "devices/host/block_uring.h"
#include "devices/log/log.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {

VirtioBoard::VirtioBoard(const Config& config, VmHandles& vm, MachineLoop& loop,
                         devices::MmioBus& mmio, devices::ByteSink& console_out,
                         std::vector<devices::BlockFile> drives) {
  if (drives.empty() && !config.virtio_console) return;
  devices_ = std::make_unique<VirtioMmioDevices>(vm.vm, *loop.loop, mmio);
  if (config.virtio_console) {
    auto console = std::make_unique<devices::VirtioConsole>(console_out);
    console_ = console.get();
    // A transmit turn that stopped at its cap continues from the loop, after whatever else
    // is ready there. The loop does not run once the devices are gone (this board is destroyed
    // before the loop, after the last run_once()).
    console->set_on_tx_pending([l = loop.loop.get(), c = console.get()] {
      l->schedule([c] { c->resume_transmit(); });
    });
    devices_->add("console", std::move(console));
  }
  for (std::size_t i = 0; i < drives.size(); ++i) add_disk(config, vm, i, std::move(drives[i]));
  // The kernel was loaded (boot_cmdline) with these devices' fragment on its command line.
}

void VirtioBoard::add_disk(const Config& config, VmHandles& vm, std::size_t index,
                           devices::BlockFile file) {
  const DriveSpec& spec = config.drives[index];
  const std::string id = "minivmm-blk" + std::to_string(index);
  std::unique_ptr<devices::VirtioBlk> blk;
  if (spec.aio != DriveAio::kThreads) {
    std::string why;
    auto ring = devices::BlockUring::create(file.fd(), devices::VirtioBlk::kQueueSize, why);
    if (ring) {
      blk = std::make_unique<devices::VirtioBlk>(std::move(file), id, std::move(ring));
      vm.facts.blk_uring = true;
    } else if (spec.aio == DriveAio::kIoUring) {
      throw VmmError(ExitCode::kHostFailure, "--drive " + spec.path + ",aio=io_uring: " + why);
    } else {
      log::info("drive {}: io_uring unavailable ({}); a worker thread serves it", spec.path, why);
    }
  }
  if (!blk) {
    blk = std::make_unique<devices::VirtioBlk>(std::move(file), id, true, [&vm] {
      return vm.sandbox.try_enter(ThreadKind::kBlkWorker, blk_worker_allow_list(vm.facts));
    });
    ++workers_;
  }
  devices_->add("blk" + std::to_string(index), std::move(blk));
}

void VirtioBoard::flush_console() noexcept {
  if (console_ != nullptr) console_->flush_transmit();
}

void VirtioBoard::report(nlohmann::json& devices) const {
  if (devices_) devices_->report(devices);
}

}  // namespace minivmm::vmm
