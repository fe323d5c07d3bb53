#include "vmm/boot/x86_descriptors.h"

#include <array>
#include <stdexcept>
#include <string>

#include "vmm/boot/boot_layout.h"

namespace minivmm::vmm {

SegmentState flat_code64_segment() {
  SegmentState seg;
  seg.base = 0;
  seg.limit = 0xffffffff;
  seg.selector = kBootCodeSelector;
  seg.type = kTypeCodeExecReadAccessed;
  seg.present = true;
  seg.s = true;
  seg.l = true;
  seg.db = false;  // must be clear when l is set (SDM 3.4.5 "L flag")
  seg.g = true;
  return seg;
}

SegmentState flat_code32_segment() {
  SegmentState seg = flat_code64_segment();
  seg.l = false;
  seg.db = true;
  return seg;
}

SegmentState flat_data_segment() {
  SegmentState seg;
  seg.base = 0;
  seg.limit = 0xffffffff;
  seg.selector = kBootDataSelector;
  seg.type = kTypeDataReadWriteAccessed;
  seg.present = true;
  seg.s = true;
  seg.db = true;
  seg.g = true;
  return seg;
}

SegmentState busy_tss_segment(std::uint64_t base) {
  SegmentState seg;
  seg.base = base;
  seg.limit = kTssLimit;
  seg.selector = kBootTssSelector;
  seg.type = kTypeTssBusy;
  seg.present = true;
  seg.s = false;
  return seg;
}

SegmentState unusable_ldt_segment() {
  SegmentState seg;
  seg.base = 0;
  seg.limit = 0;
  seg.selector = 0;
  seg.type = kTypeLdt;
  seg.present = false;
  seg.s = false;
  return seg;
}

std::uint64_t encode_segment_descriptor(const SegmentState& seg) {
  const std::uint64_t limit = seg.g ? (seg.limit >> 12) : seg.limit;
  if (limit > 0xfffff) {
    // Only reachable through a programming error in this directory's segment builders.
    throw std::logic_error("segment limit " + std::to_string(seg.limit) +
                           " does not fit a descriptor without 4 KiB granularity");
  }
  const std::uint64_t base = seg.base;
  std::uint64_t desc = 0;
  desc |= limit & 0xffff;
  desc |= (base & 0xffffff) << 16;
  desc |= static_cast<std::uint64_t>(seg.type & 0xf) << 40;
  desc |= static_cast<std::uint64_t>(seg.s) << 44;
  desc |= static_cast<std::uint64_t>(seg.dpl & 0x3) << 45;
  desc |= static_cast<std::uint64_t>(seg.present) << 47;
  desc |= ((limit >> 16) & 0xf) << 48;
  desc |= static_cast<std::uint64_t>(seg.l) << 53;
  desc |= static_cast<std::uint64_t>(seg.db) << 54;
  desc |= static_cast<std::uint64_t>(seg.g) << 55;
  desc |= ((base >> 24) & 0xff) << 56;
  return desc;
}

DescriptorTable write_boot_gdt(const devices::GuestMemory& mem, const SegmentState& code,
                               const SegmentState& data, const SegmentState& tss) {
  const std::array<std::uint64_t, 6> gdt = {
      0,
      0,
      encode_segment_descriptor(code),
      encode_segment_descriptor(data),
      encode_segment_descriptor(tss),
      tss.base >> 32,  // long-mode system descriptors carry base[63:32] in a second qword
  };
  static_assert(sizeof(gdt) == kBootGdtLimit + 1);
  mem.store_obj(kGdtAddr, gdt);
  return DescriptorTable{kGdtAddr, kBootGdtLimit};
}

}  // namespace minivmm::vmm
