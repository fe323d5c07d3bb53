// Where a device writes its counters for the run report (issue 21: devices report
// themselves). Names and values, nested, and no JSON library in the devices: the VMM's writer
// (vmm/report/json_report_writer.h) turns them into the --stats JSON, and a test's writer into
// whatever it checks. A counter a device adds appears in the report without an edit outside
// the device's folder.
//
// Threads: whoever builds the report (the loop thread) calls report(); a device reads its own
// counters as its stats() does (atomics, or under its lock).
#pragma once

#include <cstdint>
#include <functional>
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
