#include "vmm/boot/x86_long_mode.h"

#include <array>
#include <cstdint>

#include "vmm/boot/boot_layout.h"
#include "vmm/boot/x86_descriptors.h"
#include "vmm/boot/x86_registers.h"

namespace minivmm::vmm {
namespace {

constexpr std::uint64_t kEntriesPerTable = 512;
constexpr std::uint64_t kPdCount = 4;  // 4 x 1 GiB: all RAM plus the LAPIC/IOAPIC MMIO page
constexpr std::uint64_t kLargePageSize = 2ull << 20;

// 2 MiB pages rather than 1 GiB ones: 1 GiB pages need CPUID.80000001H:EDX.Page1GB, which a
// guest CPU model may not expose, and an entry that needs a missing feature faults at once.
void write_identity_page_tables(const devices::GuestMemory& mem) {
  static_assert(kPdAddr + kPdCount * kPageSize == kPageTablesEnd);
  mem.fill(kPml4Addr, kPageTablesEnd - kPml4Addr, std::byte{0});
  mem.store_obj(kPml4Addr, kPdptAddr | kPtePresent | kPteWritable);
  for (std::uint64_t pd = 0; pd < kPdCount; ++pd) {
    const std::uint64_t pd_addr = kPdAddr + pd * kPageSize;
    mem.store_obj(kPdptAddr + pd * 8, pd_addr | kPtePresent | kPteWritable);
    std::array<std::uint64_t, kEntriesPerTable> entries{};
    for (std::uint64_t i = 0; i < kEntriesPerTable; ++i) {
      const std::uint64_t phys = (pd * kEntriesPerTable + i) * kLargePageSize;
      entries[i] = phys | kPtePresent | kPteWritable | kPteLargePage;
    }
    mem.store_obj(pd_addr, entries);
  }
}

}  // namespace

X86BootState setup_long_mode(const devices::GuestMemory& mem) {
  const SegmentState code = flat_code64_segment();
  const SegmentState data = flat_data_segment();
  const SegmentState tss = busy_tss_segment(kTssAddr);

  X86BootState state;
  state.gdt = write_boot_gdt(mem, code, data, tss);
  mem.fill(kTssAddr, kTssLimit + 1, std::byte{0});
  write_identity_page_tables(mem);

  state.cr0 = kCr0Pe | kCr0Et | kCr0Ne | kCr0Pg;
  state.cr3 = kPml4Addr;
  state.cr4 = kCr4Pae;
  state.efer = kEferLme | kEferLma;
  state.cs = code;
  state.ds = state.es = state.fs = state.gs = state.ss = data;
  state.tr = tss;
  state.ldt = unusable_ldt_segment();
  state.idt = DescriptorTable{0, 0};  // interrupts stay off until the kernel installs its IDT
  state.rflags = kRflagsReserved;
  state.rsp = kBootStackTop;
  return state;
}

}  // namespace minivmm::vmm
