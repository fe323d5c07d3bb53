#include "vmm/report/json_report_writer.h"

#include <string>

namespace minivmm::vmm {

JsonReportWriter::JsonReportWriter(nlohmann::json& into) : j_(into) {
  if (j_.is_null()) j_ = nlohmann::json::object();
}

void JsonReportWriter::count(std::string_view key, std::uint64_t value) {
  j_[std::string(key)] = value;
}

void JsonReportWriter::number(std::string_view key, double value) { j_[std::string(key)] = value; }

void JsonReportWriter::flag(std::string_view key, bool value) { j_[std::string(key)] = value; }

void JsonReportWriter::text(std::string_view key, std::string_view value) {
  j_[std::string(key)] = std::string(value);
}

void JsonReportWriter::object(std::string_view key,
                              const std::function<void(devices::ReportWriter&)>& fill) {
  // nlohmann's objects are std::maps: the reference stays valid while siblings are added.
  JsonReportWriter child(j_[std::string(key)]);
  fill(child);
}

void JsonReportWriter::list(std::string_view key, std::size_t count,
                            const std::function<void(std::size_t, devices::ReportWriter&)>& fill) {
  nlohmann::json& items = j_[std::string(key)] = nlohmann::json::array();
  for (std::size_t i = 0; i < count; ++i) {
    items.push_back(nlohmann::json::object());
    // A vector's elements move as it grows: write each before the next is added.
    JsonReportWriter item(items.back());
    fill(i, item);
  }
}

void JsonReportWriter::add_device(nlohmann::json& devices, const devices::ReportingDevice& device) {
  JsonReportWriter w(devices[std::string(device.report_key())]);
  device.report(w);
}

}  // namespace minivmm::vmm
