#include "devices/virtio/virtio_console.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace minivmm::devices {

void VirtioConsole::read_config(std::uint64_t /*offset*/, std::span<std::uint8_t> data) noexcept {
  // cols, rows, max_nr_ports, emerg_wr: only meaningful with features we do not offer.
  std::memset(data.data(), 0, data.size());
}

VirtioConsole::VirtioConsole(ByteSink& out) : out_(out), tx_buf_(kTxBytesPerTurn) {
  // A turn pops chains only while it has walked fewer than the cap, one descriptor at least
  // each, and may finish one held from the turn before: no allocation under the lock.
  tx_done_.reserve(kTxDescriptorsPerTurn + 1);
}

void VirtioConsole::activate(VirtioQueueHost& host, std::uint64_t /*features*/) noexcept {
  std::function<void()> rx_hook;
  std::function<void()> tx_hook;
  {
    std::lock_guard lock(mu_);
    host_ = &host;
    // The guest may have posted receive buffers and output before DRIVER_OK's notify.
    tx_hook = tx_hook_locked(transmit_locked(host));
    if (drain_rx_locked()) rx_hook = take_hook_locked();
  }
  if (tx_hook) tx_hook();
  if (rx_hook) rx_hook();
}

void VirtioConsole::reset() noexcept {
  std::lock_guard lock(mu_);
  host_ = nullptr;  // buffered input stays for the next driver
  // A chain split across turns belongs to the queue the reset cleared. A resume already
  // scheduled still runs, finds no host and does nothing.
  tx_held_ = false;
}

void VirtioConsole::queue_notify(std::size_t queue) noexcept {
  std::function<void()> hook;
  {
    std::lock_guard lock(mu_);
    if (host_ == nullptr) return;
    if (queue == kTransmitQueue) {
      hook = tx_hook_locked(transmit_locked(*host_));
    } else if (queue == kReceiveQueue && drain_rx_locked()) {
      hook = take_hook_locked();
    }
  }
  if (hook) hook();
}

void VirtioConsole::resume_transmit() noexcept {
  std::function<void()> hook;
  {
    std::lock_guard lock(mu_);
    tx_scheduled_ = false;
    if (host_ == nullptr) return;
    ++stats_.tx_resumes;
    hook = tx_hook_locked(transmit_locked(*host_));
  }
  if (hook) hook();
}

void VirtioConsole::flush_transmit() noexcept {
  std::lock_guard lock(mu_);
  if (host_ == nullptr) return;
  for (std::size_t turn = 0; turn < kTxFlushTurns && transmit_locked(*host_); ++turn) {
  }
}

void VirtioConsole::set_on_tx_pending(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  on_tx_pending_ = std::move(fn);
}

std::function<void()> VirtioConsole::tx_hook_locked(bool capped) noexcept {
  if (!capped) return nullptr;
  ++stats_.tx_capped;
  // One resume in flight is enough: it runs the next turn, which schedules the one after.
  if (tx_scheduled_ || !on_tx_pending_) return nullptr;
  tx_scheduled_ = true;
  return on_tx_pending_;
}

bool VirtioConsole::transmit_locked(VirtioQueueHost& host) noexcept {
  std::size_t staged = 0;
  std::size_t walked = 0;
  bool capped = false;
  tx_done_.clear();
  for (;;) {
    if (!tx_held_) {
      if (walked >= kTxDescriptorsPerTurn) {
        capped = true;  // maybe nothing is left; the next turn finds out, once
        break;
      }
      if (host.pop(kTransmitQueue, tx_chain_) != Virtqueue::Pop::kChain) break;
      walked += tx_chain_.descriptors.size();
      tx_held_ = true;
      tx_desc_ = 0;
      tx_offset_ = 0;
    }
    while (tx_desc_ < tx_chain_.descriptors.size()) {
      const Descriptor& d = tx_chain_.descriptors[tx_desc_];
      if (d.device_writable || tx_offset_ == d.len) {  // nothing (more) for us to read in it
        ++tx_desc_;
        tx_offset_ = 0;
        continue;
      }
      if (staged == tx_buf_.size()) break;
      const std::size_t n = static_cast<std::size_t>(
          std::min<std::uint64_t>(d.len - tx_offset_, tx_buf_.size() - staged));
      // In RAM (checked by the walker; RAM does not shrink). Copied, not written in place: one
      // sink write per turn, whatever the number of buffers.
      host.ram().read(d.addr + tx_offset_,
                      std::as_writable_bytes(std::span(tx_buf_).subspan(staged, n)));
      staged += n;
      tx_offset_ += n;
    }
    if (tx_desc_ < tx_chain_.descriptors.size()) {
      capped = true;  // the byte budget ran out inside this chain; it stays held
      break;
    }
    tx_held_ = false;
    tx_done_.push_back(tx_chain_.head);
  }
  if (staged > 0) out_.write(std::span(tx_buf_).first(staged));
  stats_.tx_bytes += staged;
  // Returned only once their bytes went out: a driver that reuses a buffer it got back cannot
  // change what is printed.
  for (const std::uint16_t head : tx_done_) {
    ++stats_.tx_chains;
    host.complete(kTransmitQueue, head, 0);
  }
  return capped;
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

void VirtioConsole::report(ReportWriter& out) const {
  const VirtioConsoleStats s = stats();
  out.object("data", [&s](ReportWriter& data) {
    data.count("tx_chains", s.tx_chains);
    data.count("tx_bytes", s.tx_bytes);
    data.count("rx_chains", s.rx_chains);
    data.count("rx_bytes", s.rx_bytes);
    data.count("rx_full", s.rx_full);
    data.count("tx_capped", s.tx_capped);
    data.count("tx_resumes", s.tx_resumes);
  });
}

}  // namespace minivmm::devices
