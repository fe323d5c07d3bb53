// libFuzzer target: the split-virtqueue walker against a guest that writes anything (input
// format: virtio_fuzz_input.h). Checks that activation refuses what the spec forbids, that every
// chain handed out lies inside guest RAM and is no longer than the tables allow, that the walk
// ends (loops are detected, not followed), that a broken queue stays broken, and that the used
// ring moves by exactly one entry per push. ASan/UBSan catch any access outside RAM.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "devices/bus/guest_memory.h"
#include "devices/virtio/virtqueue.h"
#include "tests/fuzz/virtio_fuzz_input.h"

namespace {

using minivmm::devices::DescriptorChain;
using minivmm::devices::GuestMemory;
using minivmm::devices::Virtqueue;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "virtqueue_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  minivmm::fuzz::VirtioFuzzInput in;
  if (!in.parse(data, size)) return 0;
  const GuestMemory ram{std::span(in.ram)};
  Virtqueue q(128);
  q.set_size(in.queue_size);
  q.set_desc_addr(in.desc);
  q.set_avail_addr(in.avail);
  q.set_used_addr(in.used);
  q.set_ready(true);
  const bool ok = q.activate(ram, in.indirect, in.event_idx);
  const std::uint16_t n = in.queue_size;
  const bool valid_size = n != 0 && n <= 128 && (n & (n - 1)) == 0;
  if (ok && !valid_size) fail("activated with a bad size");
  if (ok && !ram.contains(in.desc, 16u * n)) fail("activated with the table outside RAM");
  if (!ok) {
    DescriptorChain c;
    if (q.pop(c) == Virtqueue::Pop::kChain) fail("a queue that failed activation gave a chain");
    return 0;
  }

  DescriptorChain chain;
  std::uint16_t pushed = 0;
  // At most `n` chains can be available at once; a few more pops prove the queue then stays
  // empty (or broken) rather than walking stale entries.
  for (int i = 0; i < n + 4; ++i) {
    const Virtqueue::Pop r = q.pop(chain);
    if (r == Virtqueue::Pop::kEmpty) continue;
    if (r == Virtqueue::Pop::kBroken) {
      if (!q.broken()) fail("kBroken without a broken queue");
      if (q.pop(chain) != Virtqueue::Pop::kBroken) fail("a broken queue recovered by itself");
      break;
    }
    if (chain.head >= n) fail("head outside the table");
    if (chain.descriptors.size() > std::size_t{n} + Virtqueue::kMaxIndirect) {
      fail("chain longer than the tables");
    }
    std::uint64_t readable = 0, writable = 0;
    for (const auto& d : chain.descriptors) {
      if (!ram.contains(d.addr, d.len)) fail("descriptor outside RAM");
      (d.device_writable ? writable : readable) += d.len;
    }
    if (readable != chain.readable_bytes || writable != chain.writable_bytes) {
      fail("byte totals disagree with the descriptors");
    }
    q.push_used(chain.head, static_cast<std::uint32_t>(writable));
    ++pushed;
    // The device owns used.idx (it starts from 0 whatever the guest left there) and nothing
    // else it writes can land on it: it counts exactly the entries pushed.
    std::uint16_t used_now = 0;
    ram.read_obj(in.used + 2, used_now);
    if (used_now != pushed) fail("used index is not the number of entries pushed");
  }
  return 0;
}
