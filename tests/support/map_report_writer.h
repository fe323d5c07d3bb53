// A ReportWriter for device unit tests: every value under its path ("kernel_train/refills"),
// counters as numbers, so a test reads back what a device reported. typed_paths() lists every
// path with its JSON type as tests/integration/report_keys/*.txt pins them ("requests/errors
// object"), so a test can check that a device reports exactly the keys and types it must.
#pragma once

#include <cstdint>
#include <map>
#include <set>
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
    containers_[prefix_ + std::string(key)] = "object";
    MapReportWriter child(prefix_ + std::string(key) + "/");
    fill(child);
    merge(child);
  }
  // Items at "key/0/...", "key/1/...", as the default does, but typed as an array.
  void list(std::string_view key, std::size_t count,
            const std::function<void(std::size_t, devices::ReportWriter&)>& fill) override {
    const std::string path = prefix_ + std::string(key);
    containers_[path] = "array";
    for (std::size_t i = 0; i < count; ++i) {
      containers_[path + "/" + std::to_string(i)] = "object";
      MapReportWriter item(path + "/" + std::to_string(i) + "/");
      fill(i, item);
      merge(item);
    }
  }

  bool has(const std::string& path) const { return values_.count(path) != 0; }
  std::uint64_t counter(const std::string& path) const {
    return std::get<std::uint64_t>(values_.at(path));
  }
  const std::map<std::string, Value>& values() const { return values_; }

  // "path type" for every value and every object or array, empty ones included; the types are
  // JSON's (a count and a number are both "number").
  std::set<std::string> typed_paths() const {
    std::set<std::string> out;
    for (const auto& [path, v] : values_) {
      const char* type = std::holds_alternative<bool>(v)          ? "bool"
                         : std::holds_alternative<std::string>(v) ? "string"
                                                                  : "number";
      out.insert(path + " " + type);
    }
    for (const auto& [path, type] : containers_) out.insert(path + " " + type);
    return out;
  }

 private:
  void put(std::string_view key, Value v) { values_[prefix_ + std::string(key)] = std::move(v); }
  void merge(const MapReportWriter& child) {
    values_.insert(child.values_.begin(), child.values_.end());
    containers_.insert(child.containers_.begin(), child.containers_.end());
  }

  std::string prefix_;
  std::map<std::string, Value> values_;
  std::map<std::string, std::string> containers_;  // path -> "object" or "array"
};

}  // namespace minivmm::testing
