// x86 register set-up of one vCPU (x86_vcpu_setup.h): each step one ioctl or a get/modify/set
// pair, in the order Vcpu::configure() has always used.
#include "vmm/vcpu/x86_vcpu_setup.h"

#include <sys/ioctl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "vmm/kvm/kvm.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

void set_cpuid(int vcpu_fd, int index, const std::vector<kvm_cpuid_entry2>& cpuid) {
  // The kernel's layout: u32 nent, u32 padding, then the entries at offset 8 — not where
  // g++ puts `kvm_cpuid2::entries` (see kvm.h).
  const std::size_t bytes = kKvmCpuid2HeaderSize + cpuid.size() * sizeof(kvm_cpuid_entry2);
  auto buf = std::make_unique<std::byte[]>(bytes);
  auto* c = reinterpret_cast<kvm_cpuid2*>(buf.get());
  c->nent = static_cast<__u32>(cpuid.size());
  auto* entries = reinterpret_cast<kvm_cpuid_entry2*>(buf.get() + kKvmCpuid2HeaderSize);
  std::memcpy(entries, cpuid.data(), cpuid.size() * sizeof(kvm_cpuid_entry2));
  for (__u32 i = 0; i < c->nent; ++i) {
    kvm_cpuid_entry2& e = entries[i];
    // The APIC id this vCPU reports must match its KVM vcpu id.
    if (e.function == 1) e.ebx = (e.ebx & 0x00ffffffu) | (static_cast<__u32>(index) << 24);
    if (e.function == 0xb || e.function == 0x1f) e.edx = static_cast<__u32>(index);
  }
  if (::ioctl(vcpu_fd, kKvmSetCpuid2, c) < 0) throw_kvm_error("KVM_SET_CPUID2");
}

kvm_segment to_kvm(const SegmentState& s) {
  kvm_segment k{};
  k.base = s.base;
  k.limit = s.limit;
  k.selector = s.selector;
  k.type = s.type;
  k.present = s.present ? 1 : 0;
  k.dpl = s.dpl;
  k.db = s.db ? 1 : 0;
  k.s = s.s ? 1 : 0;
  k.l = s.l ? 1 : 0;
  k.g = s.g ? 1 : 0;
  k.unusable = s.present ? 0 : 1;
  return k;
}

// Starts from KVM's own sregs so that what X86BootState does not name (APIC base, the
// interrupt bitmap) keeps KVM's reset value.
void set_sregs(int vcpu_fd, const X86BootState& st) {
  kvm_sregs sregs{};
  if (::ioctl(vcpu_fd, KVM_GET_SREGS, &sregs) < 0) throw_kvm_error("KVM_GET_SREGS");
  sregs.cs = to_kvm(st.cs);
  sregs.ds = to_kvm(st.ds);
  sregs.es = to_kvm(st.es);
  sregs.fs = to_kvm(st.fs);
  sregs.gs = to_kvm(st.gs);
  sregs.ss = to_kvm(st.ss);
  sregs.tr = to_kvm(st.tr);
  sregs.ldt = to_kvm(st.ldt);
  sregs.gdt.base = st.gdt.base;
  sregs.gdt.limit = st.gdt.limit;
  sregs.idt.base = st.idt.base;
  sregs.idt.limit = st.idt.limit;
  sregs.cr0 = st.cr0;
  sregs.cr3 = st.cr3;
  sregs.cr4 = st.cr4;
  sregs.efer = st.efer;
  if (::ioctl(vcpu_fd, KVM_SET_SREGS, &sregs) < 0) throw_kvm_error("KVM_SET_SREGS");
}

void set_regs(int vcpu_fd, const X86BootState& st) {
  kvm_regs regs{};
  regs.rip = st.rip;
  regs.rsp = st.rsp;
  regs.rsi = st.rsi;
  regs.rax = st.rax;
  regs.rbx = st.rbx;
  regs.rflags = st.rflags;
  if (::ioctl(vcpu_fd, KVM_SET_REGS, &regs) < 0) throw_kvm_error("KVM_SET_REGS");
}

void set_firmware_msrs(int vcpu_fd) {
  // MSRs a PC firmware leaves set (Firecracker's boot MSRs): memory type write-back through
  // MTRRdefType (at reset MTRRs are off, so every access would be uncached) and fast strings.
  constexpr std::uint32_t kMsrIa32MiscEnable = 0x1a0;
  constexpr std::uint32_t kMsrMtrrDefType = 0x2ff;
  // The kernel's layout: u32 nmsrs, u32 pad, then the entries (see kKvmSetMsrs).
  struct BootMsrs {
    std::uint32_t nmsrs;
    std::uint32_t pad;
    kvm_msr_entry entries[2];
  } msrs{};
  static_assert(offsetof(BootMsrs, entries) == kKvmCpuid2HeaderSize);
  msrs.nmsrs = 2;
  msrs.entries[0].index = kMsrIa32MiscEnable;
  msrs.entries[0].data = 1;  // fast-string enable
  msrs.entries[1].index = kMsrMtrrDefType;
  msrs.entries[1].data = (1u << 11) | 6;  // MTRRs enabled, default type WB
  if (::ioctl(vcpu_fd, kKvmSetMsrs, &msrs) != 2) throw_kvm_error("KVM_SET_MSRS");
}

void set_reset_fpu(int vcpu_fd) {
  kvm_fpu fpu{};
  fpu.fcw = 0x37f;     // x87 default control word after FNINIT
  fpu.mxcsr = 0x1f80;  // all SSE exceptions masked, as after reset
  if (::ioctl(vcpu_fd, KVM_SET_FPU, &fpu) < 0) throw_kvm_error("KVM_SET_FPU");
}

void set_lint(int vcpu_fd, bool extint_on_lint0) {
  // LINT0 = ExtINT and LINT1 = NMI, as a PC BIOS programs them: without it KVM's local APIC
  // keeps LINT0 masked and no 8259 interrupt ever reaches the CPU.
  kvm_lapic_state lapic{};
  if (::ioctl(vcpu_fd, KVM_GET_LAPIC, &lapic) < 0) throw_kvm_error("KVM_GET_LAPIC");
  auto set_lvt = [&](std::size_t reg, std::uint32_t delivery_mode) {
    std::uint32_t v;
    std::memcpy(&v, &lapic.regs[reg], sizeof v);
    v &= ~(0x700u | 0x10000u);  // clear delivery mode and the mask bit
    v |= delivery_mode << 8;
    std::memcpy(&lapic.regs[reg], &v, sizeof v);
  };
  if (extint_on_lint0) set_lvt(0x350, 0x7);  // LVT LINT0: ExtINT
  set_lvt(0x360, 0x4);  // LVT LINT1: NMI
  if (::ioctl(vcpu_fd, KVM_SET_LAPIC, &lapic) < 0) throw_kvm_error("KVM_SET_LAPIC");
}

void set_wait_for_sipi(int vcpu_fd) {
  // KVM already creates every vCPU but the boot CPU (id 0) in this state when the LAPIC is in
  // the kernel; say so explicitly, so that the AP's start never depends on that default.
  kvm_mp_state mp{};
  mp.mp_state = KVM_MP_STATE_UNINITIALIZED;
  if (::ioctl(vcpu_fd, KVM_SET_MP_STATE, &mp) < 0) throw_kvm_error("KVM_SET_MP_STATE");
}

}  // namespace

void set_up_boot_vcpu(int vcpu_fd, int index, const X86BootState& state,
                      const std::vector<kvm_cpuid_entry2>& cpuid) {
  set_cpuid(vcpu_fd, index, cpuid);
  set_sregs(vcpu_fd, state);
  set_regs(vcpu_fd, state);
  set_firmware_msrs(vcpu_fd);
  set_reset_fpu(vcpu_fd);
  set_lint(vcpu_fd, /*extint_on_lint0=*/true);
}

void set_up_application_vcpu(int vcpu_fd, int index,
                             const std::vector<kvm_cpuid_entry2>& cpuid) {
  set_cpuid(vcpu_fd, index, cpuid);
  set_firmware_msrs(vcpu_fd);
  set_reset_fpu(vcpu_fd);
  set_lint(vcpu_fd, /*extint_on_lint0=*/false);
  set_wait_for_sipi(vcpu_fd);
}

void set_up_s3_resume(int vcpu_fd, std::uint32_t waking_vector) {
  // The registers an INIT leaves (SDM vol. 3 table 10-1), but CS:IP at the vector in real
  // mode, as the ACPI spec (5.2.10) and SeaBIOS's s3_resume hand over: CS = vector >> 4,
  // IP = vector & 0xf.
  kvm_sregs sregs{};
  if (::ioctl(vcpu_fd, KVM_GET_SREGS, &sregs) < 0) throw_kvm_error("KVM_GET_SREGS");
  const auto real_mode = [](kvm_segment& seg, std::uint16_t selector, std::uint8_t type) {
    seg = kvm_segment{};
    seg.selector = selector;
    seg.base = std::uint64_t{selector} << 4;
    seg.limit = 0xffff;
    seg.type = type;
    seg.present = 1;
    seg.s = 1;
  };
  real_mode(sregs.cs, static_cast<std::uint16_t>(waking_vector >> 4), 0xb);  // code, accessed
  for (kvm_segment* seg : {&sregs.ds, &sregs.es, &sregs.fs, &sregs.gs, &sregs.ss}) {
    real_mode(*seg, 0, 0x3);  // data, read/write, accessed
  }
  sregs.ldt = kvm_segment{};
  sregs.ldt.limit = 0xffff;
  sregs.ldt.type = 0x2;
  sregs.ldt.present = 1;
  sregs.tr = kvm_segment{};
  sregs.tr.limit = 0xffff;
  sregs.tr.type = 0xb;  // busy 32-bit TSS, as KVM's own reset leaves it
  sregs.tr.present = 1;
  sregs.gdt = kvm_dtable{0, 0xffff, {}};
  sregs.idt = kvm_dtable{0, 0xffff, {}};
  sregs.cr0 = 0x60000010;  // CD, NW, ET
  sregs.cr2 = 0;
  sregs.cr3 = 0;
  sregs.cr4 = 0;
  sregs.efer = 0;
  std::memset(sregs.interrupt_bitmap, 0, sizeof sregs.interrupt_bitmap);
  if (::ioctl(vcpu_fd, KVM_SET_SREGS, &sregs) < 0) throw_kvm_error("KVM_SET_SREGS");
  kvm_regs regs{};
  regs.rip = waking_vector & 0xf;
  regs.rflags = 0x2;
  if (::ioctl(vcpu_fd, KVM_SET_REGS, &regs) < 0) throw_kvm_error("KVM_SET_REGS");
  kvm_mp_state mp{};
  mp.mp_state = KVM_MP_STATE_RUNNABLE;
  if (::ioctl(vcpu_fd, KVM_SET_MP_STATE, &mp) < 0) throw_kvm_error("KVM_SET_MP_STATE");
}

void set_up_s3_resume_ap(int vcpu_fd) { set_wait_for_sipi(vcpu_fd); }

}  // namespace minivmm::vmm
