// The devices' ReportWriter, writing into a JSON object of the run report.
#pragma once

#include <nlohmann/json.hpp>

#include "devices/bus/report_writer.h"

namespace minivmm::vmm {

class JsonReportWriter final : public devices::ReportWriter {
 public:
  // Writes into `into` (made an object if it is null); it must outlive this writer.
  explicit JsonReportWriter(nlohmann::json& into);

  void count(std::string_view key, std::uint64_t value) override;
  void number(std::string_view key, double value) override;
  void flag(std::string_view key, bool value) override;
  void text(std::string_view key, std::string_view value) override;
  void object(std::string_view key,
              const std::function<void(devices::ReportWriter&)>& fill) override;
  void list(std::string_view key, std::size_t count,
            const std::function<void(std::size_t, devices::ReportWriter&)>& fill) override;

  // Each device under its report_key().
  static void add_device(nlohmann::json& devices, const devices::ReportingDevice& device);

 private:
  nlohmann::json& j_;
};

}  // namespace minivmm::vmm
