#include "devices/bus/io_bus.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "devices/log/log.h"

namespace minivmm::devices {
namespace {

// Enough to see what a guest probes without letting a guest flood the log.
constexpr std::uint64_t kMaxUnmappedLogs = 64;

// "0x0061": what fmt's "{:#06x}" makes of a port (printf's "%#06x" would print 0 as "000000").
std::string port_key(std::uint16_t port) {
  char buf[sizeof "0xffff"];
  std::snprintf(buf, sizeof buf, "0x%04x", static_cast<unsigned>(port));
  return buf;
}

}  // namespace

void IoBus::attach(std::uint16_t base, std::uint16_t length, PortIoDevice& device) {
  const std::uint32_t end = std::uint32_t{base} + length;
  if (length == 0 || end > 0x10000) throw std::invalid_argument("IoBus::attach: bad port range");
  for (const Range& r : ranges_) {
    if (base < r.end && r.base < end) {
      throw std::invalid_argument("IoBus::attach: " + std::string(device.name()) +
                                  " overlaps " + std::string(r.device->name()));
    }
  }
  ranges_.push_back(Range{base, end, &device});
  std::sort(ranges_.begin(), ranges_.end(),
            [](const Range& a, const Range& b) { return a.base < b.base; });
}

const IoBus::Range* IoBus::find(std::uint16_t port) const noexcept {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), port,
                             [](std::uint16_t p, const Range& r) { return p < r.base; });
  if (it == ranges_.begin()) return nullptr;
  --it;
  return port < it->end ? &*it : nullptr;
}

void IoBus::count_unmapped(std::uint16_t port, bool is_write, std::size_t width) noexcept {
  std::lock_guard lock(mu_);
  UnmappedAccess& u = unmapped_[port];
  u.port = port;
  (is_write ? u.writes : u.reads)++;
  if (logged_ < kMaxUnmappedLogs) {
    ++logged_;
    log::debug("guest: unmapped port {} 0x{:04x} width {}{}", is_write ? "write" : "read",
               port, width, logged_ == kMaxUnmappedLogs ? " (further ones not logged)" : "");
  }
}

bool IoBus::read(std::uint16_t port, std::span<std::uint8_t> data) noexcept {
  if (const Range* r = find(port)) {
    r->device->read(static_cast<std::uint16_t>(port - r->base), data);
    return true;
  }
  std::memset(data.data(), 0xff, data.size());
  count_unmapped(port, false, data.size());
  return false;
}

bool IoBus::write(std::uint16_t port, std::span<const std::uint8_t> data) noexcept {
  if (const Range* r = find(port)) {
    r->device->write(static_cast<std::uint16_t>(port - r->base), data);
    return true;
  }
  count_unmapped(port, true, data.size());
  return false;
}

std::vector<UnmappedAccess> IoBus::unmapped() const {
  std::lock_guard lock(mu_);
  std::vector<UnmappedAccess> out;
  for (const auto& [port, u] : unmapped_) out.push_back(u);
  return out;
}

void IoBus::report(ReportWriter& out) const {
  for (const UnmappedAccess& u : unmapped()) {
    out.object(port_key(u.port), [&u](ReportWriter& port) {
      port.count("reads", u.reads);
      port.count("writes", u.writes);
    });
  }
}

}  // namespace minivmm::devices
