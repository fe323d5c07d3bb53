#include "devices/virtio_console.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace minivmm::devices {

void VirtioConsole::read_config(std::uint64_t /*offset*/, std::span<std::uint8_t> data) noexcept {
  // cols, rows, max_nr_ports, emerg_wr: only meaningful with features we do not offer.
  std::memset(data.data(), 0, data.size());
}

void VirtioConsole::activate(VirtioQueueHost& host, std::uint64_t /*features*/) noexcept {
  std::function<void()> hook;
  {
    std::lock_guard lock(mu_);
    host_ = &host;
    // The guest may have posted receive buffers and output before DRIVER_OK's notify.
    transmit_locked(host);
    if (drain_rx_locked()) hook = take_hook_locked();
  }
  if (hook) hook();
}

void VirtioConsole::reset() noexcept {
  std::lock_guard lock(mu_);
  host_ = nullptr;  // buffered input stays for the next driver
}

void VirtioConsole::queue_notify(std::size_t queue) noexcept {
  std::function<void()> hook;
  {
    std::lock_guard lock(mu_);
    if (host_ == nullptr) return;
    if (queue == kTransmitQueue) {
      transmit_locked(*host_);
    } else if (queue == kReceiveQueue && drain_rx_locked()) {
      hook = take_hook_locked();
    }
  }
  if (hook) hook();
}

void VirtioConsole::transmit_locked(VirtioQueueHost& host) noexcept {
  while (host.pop(kTransmitQueue, chain_) == Virtqueue::Pop::kChain) {
    for (const Descriptor& d : chain_.descriptors) {
      if (d.device_writable) continue;  // nothing for us to read in it
      // In RAM (checked by the walker); handed to the sink in place, no copy.
      std::span<std::byte> bytes = host.ram().slice(d.addr, d.len);
      out_.write(std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
      stats_.tx_bytes += d.len;
    }
    ++stats_.tx_chains;
    host.complete(kTransmitQueue, chain_.head, 0);
  }
}

bool VirtioConsole::drain_rx_locked() noexcept {
  if (host_ == nullptr) return false;
  bool made_room = false;
  while (!rx_.empty()) {
    if (host_->pop(kReceiveQueue, chain_) != Virtqueue::Pop::kChain) break;
    std::uint32_t written = 0;
    for (const Descriptor& d : chain_.descriptors) {
      if (!d.device_writable || rx_.empty()) continue;
      const std::size_t n = std::min<std::size_t>(d.len, rx_.size());
      std::array<std::byte, kRxBuffer> tmp{};
      for (std::size_t i = 0; i < n; ++i) tmp[i] = static_cast<std::byte>(rx_[i]);
      host_->ram().write(d.addr, std::span(tmp.data(), n));
      rx_.erase(rx_.begin(), rx_.begin() + static_cast<std::ptrdiff_t>(n));
      written += static_cast<std::uint32_t>(n);
    }
    ++stats_.rx_chains;
    stats_.rx_bytes += written;
    made_room = made_room || written > 0;
    host_->complete(kReceiveQueue, chain_.head, written);
  }
  return made_room;
}

std::function<void()> VirtioConsole::take_hook_locked() noexcept {
  if (!rx_waiting_ || rx_.size() >= kRxBuffer || !on_rx_space_) return nullptr;
  rx_waiting_ = false;
  return on_rx_space_;
}

std::size_t VirtioConsole::receive(std::span<const std::uint8_t> bytes) noexcept {
  std::function<void()> hook;
  std::size_t n = 0;
  {
    std::lock_guard lock(mu_);
    n = std::min(bytes.size(), kRxBuffer - rx_.size());
    rx_.insert(rx_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    drain_rx_locked();
    if (n < bytes.size()) {
      // The caller stops reading until the hook; if the drain already made room, say so now.
      rx_waiting_ = true;
      ++stats_.rx_full;
      hook = take_hook_locked();
    }
  }
  if (hook) hook();
  return n;
}

std::size_t VirtioConsole::rx_space() const noexcept {
  std::lock_guard lock(mu_);
  const std::size_t space = kRxBuffer - rx_.size();
  if (space == 0) rx_waiting_ = true;
  return space;
}

void VirtioConsole::set_on_rx_space(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  on_rx_space_ = std::move(fn);
}

VirtioConsoleStats VirtioConsole::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace minivmm::devices
