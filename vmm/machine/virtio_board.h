// The virtio-mmio devices the configuration asks for, on the board's MMIO bus at its virtio
// windows (board_layout.h): virtio-console (--console virtio) first, then a virtio-blk disk per
// --drive, each served by a locked-down io_uring the loop drives or, where the kernel refuses
// one (or aio=threads), by a worker thread of its own with its own seccomp filter, then a
// virtio-net NIC per --net on its back-end (net_backends.h), then a virtio-9p device per --share,
// each served by a worker thread with its own seccomp filter (docs/9p.md).
//
// Threads: built on the main thread before the vCPUs start; report() on the loop thread;
// destroyed after the vCPUs have stopped and before the loop.
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "devices/bus/byte_sink.h"
#include "devices/bus/mmio_bus.h"
#include "devices/host/block_file.h"
#include "devices/virtio/blk/virtio_blk.h"
#include "devices/host/stdout_sink.h"
#include "devices/virtio/virtio_console.h"
#include "vmm/machine/config.h"
#include "vmm/machine/machine_loop.h"
#include "vmm/machine/net_backends.h"
#include "vmm/machine/virtio_mmio_devices.h"
#include "vmm/machine/vm_handles.h"

namespace minivmm::vmm {

class VirtioBoard {
 public:
  // Takes the drive files (opened and checked before KVM). Sets vm.facts.blk_uring when a disk
  // gets its io_uring. Throws VmmError.
  VirtioBoard(const Config& config, VmHandles& vm, MachineLoop& loop, devices::MmioBus& mmio,
              devices::ByteSink& console_out, std::vector<devices::BlockFile> drives,
              NetBackends& nets);
  VirtioBoard(const VirtioBoard&) = delete;
  VirtioBoard& operator=(const VirtioBoard&) = delete;

  // --console virtio, else nullptr.
  devices::VirtioConsole* console() const noexcept { return console_; }
  // Disks served by a worker thread: the loop waits until each has filtered itself.
  std::size_t worker_threads() const noexcept { return workers_; }
  // Shares, each served by a worker thread: the same wait.
  std::size_t ninep_threads() const noexcept { return ninep_workers_; }

  // Output a capped transmit turn left for a bottom half the stopped loop will not run.
  void flush_console() noexcept;
  // Snapshots: every device's transport (which saves its device with it) under its report key
  // ("virtio_blk0"), and the wait until no request is in flight (throws StateError past its
  // bound).
  std::vector<std::pair<std::string, devices::StatefulDevice*>> stateful() const;
  void quiesce();
  // The end of the run: the disks' requests finished (quiesce()), then their locks given up, so
  // the next VMM on the same disk is not refused while this one's io_uring is freed by the
  // kernel after the exit (devices/host/block_file.h). A disk whose requests did not finish in
  // quiesce's bound keeps its lock until the process is gone, with a warning.
  void release_drives() noexcept;
  void report(nlohmann::json& devices) const;

 private:
  void add_disk(const Config& config, VmHandles& vm, std::size_t index, devices::BlockFile file);
  void add_nic(const Config& config, MachineLoop& loop, std::size_t index,
               devices::NetBackend& backend);
  void add_share(VmHandles& vm, const ShareSpec& spec);

  std::unique_ptr<VirtioMmioDevices> devices_;  // null without virtio devices
  devices::VirtioConsole* console_ = nullptr;  // owned by devices_
  // Config::output_console_fds: a sink per output-only console (the consoles hold references).
  std::vector<std::unique_ptr<devices::StdoutSink>> output_sinks_;
  std::vector<devices::VirtioConsole*> output_consoles_;  // owned by devices_
  std::vector<devices::VirtioBlk*> disks_;                 // owned by devices_
  std::size_t workers_ = 0;
  std::size_t ninep_workers_ = 0;
};

}  // namespace minivmm::vmm
