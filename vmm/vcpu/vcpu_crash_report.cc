// A vCPU's crash report (vcpu_crash_report.h), one log::error line per group of registers.
#include "vmm/vcpu/vcpu_crash_report.h"

#include <sys/ioctl.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include <fmt/core.h>

#include "devices/log/log.h"

namespace minivmm::vmm {
namespace {

// The instruction bytes shown: enough for the longest x86 instruction (15) and then some.
constexpr std::uint64_t kInstructionBytes = 16;

void log_internal_error_data(int index, const kvm_run& run) {
  std::string data;
  for (__u32 i = 0; i < run.internal.ndata && i < 16; ++i) {
    data += fmt::format(" {:#x}", run.internal.data[i]);
  }
  log::error("vcpu{}: suberror {} data [{} ]", index, run.internal.suberror, data);
}

void log_registers(int index, const kvm_regs& r, const kvm_sregs& s) {
  log::error("vcpu{}: rip={:#018x} rflags={:#x} cs={:#x} (base {:#x}, l={} db={})", index,
             r.rip, r.rflags, s.cs.selector, s.cs.base, s.cs.l, s.cs.db);
  log::error("vcpu{}: rax={:#x} rbx={:#x} rcx={:#x} rdx={:#x} rsi={:#x} rdi={:#x}", index,
             r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi);
  log::error("vcpu{}: rsp={:#x} rbp={:#x} r8={:#x} r9={:#x} r10={:#x} r11={:#x}", index,
             r.rsp, r.rbp, r.r8, r.r9, r.r10, r.r11);
  log::error("vcpu{}: r12={:#x} r13={:#x} r14={:#x} r15={:#x}", index, r.r12, r.r13,
             r.r14, r.r15);
  log::error("vcpu{}: cr0={:#x} cr2={:#x} cr3={:#x} cr4={:#x} efer={:#x}", index, s.cr0,
             s.cr2, s.cr3, s.cr4, s.efer);
}

// The bytes at cs.base + rip, through the guest's own page tables (KVM_TRANSLATE); nothing
// when that address does not translate or lies outside RAM.
void log_instruction_bytes(int vcpu_fd, int index, const kvm_regs& r, const kvm_sregs& s,
                           const devices::GuestMemory& memory) {
  kvm_translation tr{};
  tr.linear_address = s.cs.base + r.rip;
  if (::ioctl(vcpu_fd, KVM_TRANSLATE, &tr) != 0 || !tr.valid ||
      !memory.contains(tr.physical_address, kInstructionBytes)) {
    return;
  }
  std::string bytes;
  for (std::byte b : memory.slice(tr.physical_address, kInstructionBytes)) {
    bytes += fmt::format(" {:02x}", static_cast<unsigned>(b));
  }
  log::error("vcpu{}: instruction bytes at {:#x}:{}", index, tr.physical_address, bytes);
}

}  // namespace

void log_crash_report(int vcpu_fd, int index, const kvm_run& run,
                      const devices::GuestMemory& memory, const std::string& what) {
  log::error("vcpu{}: {}", index, what);
  if (run.exit_reason == KVM_EXIT_INTERNAL_ERROR) log_internal_error_data(index, run);
  kvm_regs r{};
  kvm_sregs s{};
  if (::ioctl(vcpu_fd, KVM_GET_REGS, &r) < 0 || ::ioctl(vcpu_fd, KVM_GET_SREGS, &s) < 0) {
    log::error("vcpu{}: registers unavailable: {}", index, std::strerror(errno));
    return;
  }
  log_registers(index, r, s);
  log_instruction_bytes(vcpu_fd, index, r, s, memory);
}

}  // namespace minivmm::vmm
