// A ByteSink that keeps everything written, and counts write calls (to check batching).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "devices/bus/byte_sink.h"

namespace minivmm::testing {

class VectorSink final : public devices::ByteSink {
 public:
  void write(std::span<const std::uint8_t> bytes) noexcept override {
    std::lock_guard lock(mu_);
    data_.insert(data_.end(), bytes.begin(), bytes.end());
    ++writes_;
  }
  std::string str() const {
    std::lock_guard lock(mu_);
    return std::string(data_.begin(), data_.end());
  }
  int writes() const { std::lock_guard lock(mu_); return writes_; }

 private:
  mutable std::mutex mu_;
  std::vector<std::uint8_t> data_;
  int writes_ = 0;
};

}  // namespace minivmm::testing
