#include "vmm/machine/virtio_mmio_devices.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/core.h>

#include "devices/log/log.h"
#include "loop/poller.h"
#include "vmm/report/json_report_writer.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {

VirtioMmioDevices::VirtioMmioDevices(const Vm& vm, loop::EventLoop& loop, devices::MmioBus& bus)
    : vm_(vm), loop_(loop), bus_(bus), ram_(vm.memory().bytes()) {}

VirtioMmioDevices::~VirtioMmioDevices() {
  // First every device stops: a blk worker may be completing a request into its transport and
  // interrupt line, which the slot destroys before the device (a use-after-free otherwise).
  for (auto& slot : slots_) slot->device->reset();
  for (auto& slot : slots_) {
    if (const int fd = slot->device->completion_fd(); fd >= 0) loop_.unwatch(fd);
    const std::uint64_t notify = slot->base + devices::VirtioMmioTransport::kQueueNotify;
    for (std::size_t q = 0; q < slot->notify_fds.size(); ++q) {
      const int fd = slot->notify_fds[q].get();
      if (fd < 0) continue;
      loop_.unwatch(fd);
      vm_.remove_ioeventfd(fd, notify, static_cast<std::uint32_t>(q));
    }
  }
}

devices::VirtioMmioTransport& VirtioMmioDevices::add(
    std::string label, std::unique_ptr<devices::VirtioDevice> device) {
  if (slots_.size() >= kMaxDevices) {
    throw VmmError(ExitCode::kUsage,
                   "at most " + std::to_string(kMaxDevices) + " virtio devices");
  }
  auto slot = std::make_unique<Slot>();
  slot->label = std::move(label);
  slot->base = slot_base(slots_.size());
  slot->gsi = board::kVirtioGsis[slots_.size()];
  slot->device = std::move(device);
  slot->irq = std::make_unique<KvmIrqLine>(vm_, slot->gsi);
  slot->transport =
      std::make_unique<devices::VirtioMmioTransport>(*slot->device, ram_, *slot->irq);
  // A snapshot's section for it: "dev:virtio_blk0", as the report names it.
  slot->transport->set_state_key("virtio_" + slot->label);
  bus_.attach(slot->base, devices::VirtioMmioTransport::kWindowSize, *slot->transport);
  register_notify(*slot);
  if (const int fd = slot->device->completion_fd(); fd >= 0) {
    // virtio-blk's io_uring completions: answered from the loop, like the notifications.
    loop_.watch(fd, loop::kReadable,
                loop::FdHandlers{[d = slot->device.get()] { d->on_completion_fd(); }, nullptr,
                                 nullptr});
  }
  slots_.push_back(std::move(slot));
  return *slots_.back()->transport;
}

void VirtioMmioDevices::register_notify(Slot& slot) {
  const std::uint64_t notify = slot.base + devices::VirtioMmioTransport::kQueueNotify;
  for (std::size_t q = 0; q < slot.device->num_queues(); ++q) {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!fd.valid()) {
      throw VmmError(ExitCode::kHostFailure, std::string("eventfd: ") + std::strerror(errno));
    }
    try {
      vm_.add_ioeventfd(fd.get(), notify, static_cast<std::uint32_t>(q));
    } catch (const VmmError& e) {
      // Still correct without it: the write exits to the vCPU thread, which notifies.
      log::warn("virtio {}: queue {} notifications go through the vCPU thread ({})",
                slot.label, q, e.what());
      slot.notify_fds.emplace_back();
      continue;
    }
    const int raw = fd.get();
    loop_.watch(raw, loop::kReadable,
                loop::FdHandlers{[&slot, raw, q] {
                                   std::uint64_t count = 0;
                                   // EAGAIN: a spurious wake; nothing to do.
                                   if (::read(raw, &count, sizeof count) != sizeof count) return;
                                   ++slot.eventfd_reads;
                                   slot.transport->notify_from_eventfd(
                                       static_cast<std::uint32_t>(q));
                                 },
                                 nullptr, nullptr});
    slot.notify_fds.push_back(std::move(fd));
  }
}

std::string VirtioMmioDevices::cmdline() const { return cmdline_for(slots_.size()); }

std::string VirtioMmioDevices::cmdline_for(std::size_t count) {
  if (count > kMaxDevices) {
    throw VmmError(ExitCode::kUsage, "at most " + std::to_string(kMaxDevices) + " virtio devices");
  }
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (!out.empty()) out += ' ';
    out += fmt::format("virtio_mmio.device=4K@{:#x}:{}", slot_base(i), board::kVirtioGsis[i]);
  }
  return out;
}

void VirtioMmioDevices::report(nlohmann::json& devices) const {
  for (const auto& slot : slots_) {
    // One object per slot: the transport's counters, the device's own, and where KVM wired it.
    JsonReportWriter w(devices["virtio_" + slot->label]);
    slot->transport->report(w);
    slot->device->report(w);
    w.text("mmio_base", fmt::format("{:#x}", slot->base));
    w.count("gsi", slot->gsi);
    w.count("eventfd_reads", slot->eventfd_reads);
  }
}

std::vector<std::pair<std::string, devices::StatefulDevice*>> VirtioMmioDevices::stateful() const {
  std::vector<std::pair<std::string, devices::StatefulDevice*>> out;
  for (const auto& s : slots_) out.emplace_back(std::string(s->transport->state_key()), s->transport.get());
  return out;
}

void VirtioMmioDevices::quiesce() {
  for (const auto& s : slots_) s->transport->quiesce();
}

}  // namespace minivmm::vmm
