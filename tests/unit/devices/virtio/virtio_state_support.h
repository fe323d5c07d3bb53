// Shared by the virtio snapshot tests: saving and loading a transport's record, the record's
// layout (virtio_mmio_state.cc, version 2) for tests that write impossible values into it, and
// the check that a record cut short at any length, or one byte longer, is refused.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "devices/bus/device_state.h"
#include "devices/virtio/virtqueue.h"

namespace minivmm::testing {

using Record = std::vector<std::uint8_t>;

inline Record save_record(const devices::StatefulDevice& d) {
  devices::StateWriter w;
  d.save_state(w);
  return w.data();
}

inline void load_record(devices::StatefulDevice& d, const Record& record) {
  devices::StateReader r(record, std::string(d.state_key()));
  d.load_state(r);
}

// Offsets into a transport record: the registers, then one block per queue.
namespace mmio_record {
inline constexpr std::size_t kVersion = 0, kDeviceId = 1, kStatus = 5, kDriverFeatures = 17,
                             kInterruptStatus = 29, kLive = 33, kQueueCount = 34, kQueues = 38;
// Within a queue's block.
inline constexpr std::size_t kSize = 0, kDesc = 2, kAvail = 10, kUsed = 18, kReady = 26,
                             kActive = 27, kBroken = 28, kIndirect = 29, kEventIdx = 30,
                             kNextAvail = 31, kNextUsed = 33;
// Configuration and positions (35 bytes), then 4 counters and one per queue error.
inline constexpr std::size_t kQueueBytes =
    35 + 8 * (4 + static_cast<std::size_t>(devices::QueueError::kCount));
// After the queues: 9 transport counters, then the device record's length and bytes.
inline constexpr std::size_t kCounterBytes = 9 * 8;

inline std::size_t queue(std::size_t index, std::size_t field) {
  return kQueues + index * kQueueBytes + field;
}
inline std::size_t device_record(std::size_t queues) {
  return kQueues + queues * kQueueBytes + kCounterBytes;
}
}  // namespace mmio_record

template <typename T>
void poke(Record& r, std::size_t at, T v) {
  ASSERT_LE(at + sizeof v, r.size());
  std::memcpy(r.data() + at, &v, sizeof v);
}
template <typename T>
T peek(const Record& r, std::size_t at) {
  T v{};
  std::memcpy(&v, r.data() + at, sizeof v);
  return v;
}

// Loads `record` with `n` bytes into a device `fresh` makes; true if it was refused.
inline bool refused(const std::function<void(const Record&)>& load_fresh, const Record& record) {
  try {
    load_fresh(record);
  } catch (const devices::StateError&) {
    return true;
  }
  return false;
}

// Every truncation of `record`, and the record with one more byte, is refused.
inline void expect_truncations_refused(const Record& record,
                                       const std::function<void(const Record&)>& load_fresh) {
  for (std::size_t n = 0; n < record.size(); ++n) {
    EXPECT_TRUE(refused(load_fresh, Record(record.begin(), record.begin() + static_cast<std::ptrdiff_t>(n))))
        << "cut to " << n << " of " << record.size() << " bytes";
  }
  Record longer = record;
  longer.push_back(0);
  EXPECT_TRUE(refused(load_fresh, longer)) << "one byte longer";
}

}  // namespace minivmm::testing
