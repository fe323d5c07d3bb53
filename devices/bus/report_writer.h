// Where a device writes its counters for the run report (issue 21: devices report
// themselves). Names and values, nested, and no JSON library in the devices: the VMM's writer
// (vmm/report/json_report_writer.h) turns them into the --stats JSON, and a test's writer into
// whatever it checks. A counter a device adds appears in the report without an edit outside
// the device's folder.
//
// Threads: whoever builds the report (the loop thread) calls report(); a device reads its own
// counters as its stats() does (atomics, or under its lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace minivmm::devices {

class ReportWriter {
 public:
  virtual ~ReportWriter() = default;

  virtual void count(std::string_view key, std::uint64_t value) = 0;
  virtual void number(std::string_view key, double value) = 0;
  virtual void flag(std::string_view key, bool value) = 0;
  virtual void text(std::string_view key, std::string_view value) = 0;
  // A nested object under `key`, filled by `fill` before object() returns.
  virtual void object(std::string_view key, const std::function<void(ReportWriter&)>& fill) = 0;
  // An array of `count` objects under `key` (a virtqueue's counters per queue), the i-th
  // filled by fill(i, writer). The default writes an object keyed "0", "1", ... for writers
  // that have no arrays (a store of paths); a writer that has them (JSON) overrides it, or the
  // report's type of `key` changes.
  virtual void list(std::string_view key, std::size_t count,
                    const std::function<void(std::size_t, ReportWriter&)>& fill) {
    object(key, [&](ReportWriter& items) {
      for (std::size_t i = 0; i < count; ++i) {
        items.object(std::to_string(i), [&](ReportWriter& item) { fill(i, item); });
      }
    });
  }
};

// A device that reports itself: its counters go under report_key() in the report's
// "devices" object.
class ReportingDevice {
 public:
  virtual ~ReportingDevice() = default;
  virtual std::string_view report_key() const noexcept = 0;
  virtual void report(ReportWriter& out) const = 0;
};

}  // namespace minivmm::devices
