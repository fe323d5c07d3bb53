// A ReportWriter for device unit tests: every value under its path ("kernel_train/refills"),
// counters as numbers, so a test reads back what a device reported.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>

#include "devices/bus/report_writer.h"

namespace minivmm::testing {

class MapReportWriter final : public devices::ReportWriter {
 public:
  using Value = std::variant<std::uint64_t, double, bool, std::string>;

  explicit MapReportWriter(std::string prefix = "") : prefix_(std::move(prefix)) {}

  void count(std::string_view key, std::uint64_t value) override { put(key, value); }
  void number(std::string_view key, double value) override { put(key, value); }
  void flag(std::string_view key, bool value) override { put(key, value); }
  void text(std::string_view key, std::string_view value) override {
    put(key, std::string(value));
  }
  void object(std::string_view key,
              const std::function<void(devices::ReportWriter&)>& fill) override {
    MapReportWriter child(prefix_ + std::string(key) + "/");
    fill(child);
    values_.insert(child.values_.begin(), child.values_.end());
  }

  bool has(const std::string& path) const { return values_.count(path) != 0; }
  std::uint64_t counter(const std::string& path) const {
    return std::get<std::uint64_t>(values_.at(path));
  }
  const std::map<std::string, Value>& values() const { return values_; }

 private:
  void put(std::string_view key, Value v) { values_[prefix_ + std::string(key)] = std::move(v); }

  std::string prefix_;
  std::map<std::string, Value> values_;
};

}  // namespace minivmm::testing
