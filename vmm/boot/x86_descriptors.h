// Segment descriptors for the boot GDT. Loaders describe each segment once, as the hidden state
// the vCPU is started with (SegmentState), and the GDT entry is encoded from that same value,
// so the in-memory GDT and the cached registers cannot disagree when the guest reloads a
// selector before installing its own GDT.
#pragma once

#include <cstdint>

#include "devices/bus/guest_memory.h"
#include "vmm/vcpu/x86_boot_state.h"

namespace minivmm::vmm {

// Linux's 64-bit boot protocol wants __BOOT_CS = 0x10 and __BOOT_DS = 0x18 (boot.rst "64-bit
// Boot Protocol"); GDT entries 0 and 1 stay null. The TSS follows at 0x20.
inline constexpr std::uint16_t kBootCodeSelector = 0x10;
inline constexpr std::uint16_t kBootDataSelector = 0x18;
inline constexpr std::uint16_t kBootTssSelector = 0x20;
inline constexpr std::uint16_t kBootGdtLimit = 6 * 8 - 1;  // TSS descriptor is 16 bytes in long mode

// Descriptor type fields (Intel SDM vol. 3A, 3.4.5.1 and 3.5). All "accessed" so the CPU never
// has to write the GDT back.
inline constexpr std::uint8_t kTypeCodeExecReadAccessed = 0xb;
inline constexpr std::uint8_t kTypeDataReadWriteAccessed = 0x3;
inline constexpr std::uint8_t kTypeTssBusy = 0xb;  // same value for 32-bit and 64-bit busy TSS
inline constexpr std::uint8_t kTypeLdt = 0x2;
inline constexpr std::uint32_t kTssLimit = 0x67;   // 104-byte TSS, the architectural minimum

// Flat 4 GiB segments. Limits are byte-granular (0xffffffff with g = true), the form KVM's
// kvm_segment expects; the GDT encoder scales them down by 4 KiB.
SegmentState flat_code64_segment();
SegmentState flat_code32_segment();
SegmentState flat_data_segment();
SegmentState busy_tss_segment(std::uint64_t base);
SegmentState unusable_ldt_segment();  // present = false means "unusable" to the vCPU code

// The 8-byte GDT entry for `seg` (the low half, for 16-byte long-mode system descriptors).
std::uint64_t encode_segment_descriptor(const SegmentState& seg);

// Writes [null, null, code, data, tss (16 bytes)] at kGdtAddr and returns the GDTR value.
DescriptorTable write_boot_gdt(const devices::GuestMemory& mem, const SegmentState& code,
                               const SegmentState& data, const SegmentState& tss);

}  // namespace minivmm::vmm
