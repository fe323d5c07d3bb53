#include "vmm/machine/virtio_board.h"

#include <string>

#include "devices/host/block_uring.h"
#include "devices/log/log.h"
#include "devices/virtio/9p/virtio_9p.h"
#include "devices/virtio/net/virtio_net.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {

VirtioBoard::VirtioBoard(const Config& config, VmHandles& vm, MachineLoop& loop,
                         devices::MmioBus& mmio, devices::ByteSink& console_out,
                         std::vector<devices::BlockFile> drives, NetBackends& nets) {
  if (config.virtio_devices() == 0) return;
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
  // minivmm exec: the command's stdout and stderr, each its own console (hvc1, hvc2 in the
  // guest after hvc0, or hvc0, hvc1 without --console virtio), never read from.
  for (std::size_t i = 0; i < config.output_console_fds.size(); ++i) {
    output_sinks_.push_back(std::make_unique<devices::StdoutSink>(config.output_console_fds[i]));
    auto out = std::make_unique<devices::VirtioConsole>(*output_sinks_.back());
    out->set_on_tx_pending([l = loop.loop.get(), c = out.get()] {
      l->schedule([c] { c->resume_transmit(); });
    });
    output_consoles_.push_back(out.get());
    devices_->add("out" + std::to_string(i), std::move(out));
  }
  for (std::size_t i = 0; i < drives.size(); ++i) add_disk(config, vm, i, std::move(drives[i]));
  for (std::size_t i = 0; i < nets.size(); ++i) add_nic(config, loop, i, nets.at(i));
  for (const ShareSpec& share : config.shares) add_share(vm, share);
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

void VirtioBoard::add_nic(const Config& config, MachineLoop& loop, std::size_t index,
                          devices::NetBackend& backend) {
  devices::VirtioNetOptions opts;
  // QEMU's default MAC for the first NIC, the next ones after it: each guest NIC its own.
  opts.mac[5] = static_cast<std::uint8_t>(opts.mac[5] + index);
  if (config.nets[index].mac) opts.mac = *config.nets[index].mac;
  const std::string label = "net" + std::to_string(index);
  // A notify or a status write that exits to a vCPU thread is handed to the loop, which owns
  // the back-end (devices/virtio/net/virtio_net.h).
  auto nic = std::make_unique<devices::VirtioNet>(
      backend, [l = loop.loop.get()](std::function<void()> fn) { l->schedule(std::move(fn)); },
      opts);
  devices_->add(label, std::move(nic));
}

void VirtioBoard::add_share(VmHandles& vm, const ShareSpec& spec) {
  std::string why;
  auto server = devices::p9::P9Server::open(spec.path, spec.read_only, why);
  if (!server) throw VmmError(ExitCode::kUsage, "--share " + spec.path + ": " + why);
  auto dev = std::make_unique<devices::Virtio9p>(std::move(server), spec.tag, true, [&vm] {
    return vm.sandbox.try_enter(ThreadKind::kNinepWorker, ninep_worker_allow_list(vm.facts));
  });
  ++ninep_workers_;
  log::info("share {}{}: mount -t 9p -o trans=virtio,version=9p2000.L {} DIR", spec.path,
            spec.read_only ? " (read-only)" : "", spec.tag);
  devices_->add(spec.tag, std::move(dev));
}

void VirtioBoard::flush_console() noexcept {
  if (console_ != nullptr) console_->flush_transmit();
  for (devices::VirtioConsole* c : output_consoles_) c->flush_transmit();
}

void VirtioBoard::report(nlohmann::json& devices) const {
  if (devices_) devices_->report(devices);
}

std::vector<std::pair<std::string, devices::StatefulDevice*>> VirtioBoard::stateful() const {
  if (!devices_) return {};
  return devices_->stateful();
}

void VirtioBoard::quiesce() {
  if (devices_) devices_->quiesce();
}

void VirtioBoard::release_drives() noexcept {
  if (disks_.empty()) return;
  try {
    quiesce();
  } catch (const std::exception& e) {
    log::warn("drives: requests still in flight at the end of the run ({}); their locks go "
              "with the process", e.what());
    return;
  }
  for (devices::VirtioBlk* d : disks_) d->release_file();
}

}  // namespace minivmm::vmm
