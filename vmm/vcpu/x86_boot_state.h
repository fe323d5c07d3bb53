// The architectural CPU state a loader asks the boot vCPU to start in. Plain values, no
// <linux/kvm.h>, so loaders are unit-testable; `Vcpu` translates it into kvm_regs/kvm_sregs.
#pragma once

#include <cstdint>

namespace minivmm::vmm {

// A segment register's hidden part, as the CPU caches it after a descriptor load.
struct SegmentState {
  std::uint64_t base = 0;
  std::uint32_t limit = 0xffff;
  std::uint16_t selector = 0;
  std::uint8_t type = 0;   // descriptor type field (e.g. 0xb = code exec/read accessed)
  bool present = true;
  std::uint8_t dpl = 0;
  bool db = false;         // default operation size 32-bit
  bool s = true;           // code/data (not system) segment
  bool l = false;          // 64-bit code segment
  bool g = false;          // 4 KiB limit granularity
};

struct DescriptorTable {
  std::uint64_t base = 0;
  std::uint16_t limit = 0;
};

struct X86BootState {
  // General purpose registers the entry convention uses.
  std::uint64_t rip = 0;
  std::uint64_t rsp = 0;
  std::uint64_t rsi = 0;
  std::uint64_t rax = 0;
  std::uint64_t rbx = 0;
  std::uint64_t rflags = 0x2;  // bit 1 is reserved-as-one; IF clear

  std::uint64_t cr0 = 0;
  std::uint64_t cr3 = 0;
  std::uint64_t cr4 = 0;
  std::uint64_t efer = 0;

  SegmentState cs, ds, es, fs, gs, ss, tr, ldt;
  DescriptorTable gdt, idt;
};

}  // namespace minivmm::vmm
