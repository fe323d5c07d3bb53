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
  disks_.push_back(blk.get());
  devices_->add("blk" + std::to_string(index), std::move(blk));
}

void VirtioBoard::flush_console() noexcept {
  if (console_ != nullptr) console_->flush_transmit();
}

void VirtioBoard::report(nlohmann::json& r) const {
  if (!devices_) return;
  const nlohmann::json transports = devices_->stats_json();
  for (auto it = transports.begin(); it != transports.end(); ++it) {
    r["virtio_" + it.key()] = it.value();
  }
  for (std::size_t i = 0; i < disks_.size(); ++i) {
    const auto b = disks_[i]->stats();
    nlohmann::json errors = nlohmann::json::object();
    for (std::size_t e = 1; e < b.errors.size(); ++e) {
      if (b.errors[e] != 0) {
        errors[std::string(devices::blk_error_name(static_cast<devices::BlkError>(e)))] =
            b.errors[e];
      }
    }
    auto& dev = r["virtio_blk" + std::to_string(i)];
    dev["engine"] = std::string(disks_[i]->engine());
    if (disks_[i]->engine() == "io_uring") {
      dev["io_uring"] = {{"requests", b.uring_requests},
                         {"submits", b.uring_submits},
                         {"resubmits", b.uring_resubmits},
                         {"submit_errors", b.uring_submit_errors}};
    }
    dev["requests"] = {{"reads", b.reads},           {"writes", b.writes},
                       {"flushes", b.flushes},       {"get_ids", b.get_ids},
                       {"discards", b.discards},     {"bytes_read", b.bytes_read},
                       {"bytes_written", b.bytes_written},
                       {"bytes_discarded", b.bytes_discarded},
                       {"io_errors", b.io_errors},   {"unanswerable", b.unanswerable},
                       {"write_syncs", b.write_syncs},
                       {"cancelled", b.cancelled},   {"errors", errors}};
  }
  if (console_ != nullptr) {
    const auto c = console_->stats();
    r["virtio_console"]["data"] = {{"tx_chains", c.tx_chains}, {"tx_bytes", c.tx_bytes},
                                   {"rx_chains", c.rx_chains}, {"rx_full", c.rx_full},
                                   {"rx_bytes", c.rx_bytes},   {"tx_capped", c.tx_capped},
                                   {"tx_resumes", c.tx_resumes}};
  }
}

}  // namespace minivmm::vmm
