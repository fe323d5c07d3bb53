#include "vmm/boot/x86_protected_mode.h"

#include "vmm/boot/boot_layout.h"
#include "vmm/boot/x86_descriptors.h"
#include "vmm/boot/x86_registers.h"

namespace minivmm::vmm {

X86BootState setup_protected_mode(const devices::GuestMemory& mem) {
  const SegmentState code = flat_code32_segment();
  const SegmentState data = flat_data_segment();
  // docs/misc/pvh.pandoc: "TR: must be a 32-bit TSS (active) with a base of '0' and a limit of
  // '0x67'". Multiboot leaves TR unspecified, so the same value serves both.
  const SegmentState tss = busy_tss_segment(0);

  X86BootState state;
  state.gdt = write_boot_gdt(mem, code, data, tss);
  state.cr0 = kCr0Pe | kCr0Et;
  state.cs = code;
  state.ds = state.es = state.fs = state.gs = state.ss = data;
  state.tr = tss;
  state.ldt = unusable_ldt_segment();
  state.idt = DescriptorTable{0, 0};
  state.rflags = kRflagsReserved;
  state.rsp = kBootStackTop;  // neither convention defines a stack; give a valid one anyway
  return state;
}

}  // namespace minivmm::vmm
