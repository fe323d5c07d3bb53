#include "vmm/gdb/kvm_gdb_target.h"

#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>

namespace minivmm::vmm::gdb {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint8_t kInt3 = 0xcc;
constexpr int kBpVector = 3, kDbVector = 1;
constexpr std::uint64_t kDr6SingleStep = 1u << 14;

// DR7's RW field for a slot: 00 execute, 01 write, 11 read or write (x86 has no read-only).
std::uint64_t dr7_rw(BreakType t) {
  switch (t) {
    case BreakType::kWrite: return 1;
    case BreakType::kAccess: return 3;
    default: return 0;
  }
}
// DR7's LEN field: 00 1 byte, 01 2, 11 4, 10 8.
std::optional<std::uint64_t> dr7_len(std::uint64_t len) {
  switch (len) {
    case 1: return 0;
    case 2: return 1;
    case 4: return 3;
    case 8: return 2;
    default: return std::nullopt;
  }
}

}  // namespace

KvmGdbTarget::KvmGdbTarget(std::vector<int> vcpu_fds, devices::GuestMemory memory,
                           bool block_irq_on_step, KvmGdbHooks hooks)
    : fds_(std::move(vcpu_fds)), mem_(memory), block_irq_on_step_(block_irq_on_step),
      hooks_(std::move(hooks)) {}

bool KvmGdbTarget::read_registers(int cpu, RegisterFile& out) {
  if (cpu < 0 || cpu >= cpu_count()) return false;
  const int fd = fds_[static_cast<std::size_t>(cpu)];
  kvm_regs r{};
  kvm_sregs s{};
  kvm_fpu f{};
  if (::ioctl(fd, KVM_GET_REGS, &r) != 0 || ::ioctl(fd, KVM_GET_SREGS, &s) != 0 ||
      ::ioctl(fd, KVM_GET_FPU, &f) != 0) {
    return false;
  }
  const std::uint64_t gpr[16] = {r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.rsp,
                                 r.r8,  r.r9,  r.r10, r.r11, r.r12, r.r13, r.r14, r.r15};
  for (int i = 0; i < 16; ++i) out.set(reg::kRax + i, gpr[i]);
  out.set(reg::kRip, r.rip);
  out.set(reg::kEflags, r.rflags);
  const kvm_segment* seg[6] = {&s.cs, &s.ss, &s.ds, &s.es, &s.fs, &s.gs};
  for (int i = 0; i < 6; ++i) out.set(reg::kCs + i, seg[i]->selector);
  for (int i = 0; i < 8; ++i) std::memcpy(out.raw(reg::kSt0 + i).data(), f.fpr[i], 10);
  // KVM keeps the abridged tag (FXSAVE's one bit per register, 1 = valid); gdb shows the full
  // one (two bits, 11 = empty). Valid registers are shown as 00 (valid).
  std::uint64_t ftag = 0;
  for (int i = 0; i < 8; ++i) {
    if (!((f.ftwx >> i) & 1)) ftag |= 3u << (2 * i);
  }
  const std::uint64_t fctl[8] = {f.fcw, f.fsw, ftag, 0, f.last_ip, 0, f.last_dp, f.last_opcode};
  for (int i = 0; i < 8; ++i) out.set(reg::kFctrl + i, fctl[i]);
  for (int i = 0; i < 16; ++i) std::memcpy(out.raw(reg::kXmm0 + i).data(), f.xmm[i], 16);
  out.set(reg::kMxcsr, f.mxcsr);
  out.set(reg::kFsBase, s.fs.base);
  out.set(reg::kGsBase, s.gs.base);
  out.set(reg::kCr0, s.cr0);
  out.set(reg::kCr2, s.cr2);
  out.set(reg::kCr3, s.cr3);
  out.set(reg::kCr4, s.cr4);
  out.set(reg::kCr8, s.cr8);
  out.set(reg::kEfer, s.efer);
  return true;
}

bool KvmGdbTarget::write_registers(int cpu, const RegisterFile& in) {
  if (cpu < 0 || cpu >= cpu_count()) return false;
  const int fd = fds_[static_cast<std::size_t>(cpu)];
  kvm_regs r{};
  kvm_sregs s{};
  kvm_fpu f{};
  if (::ioctl(fd, KVM_GET_REGS, &r) != 0 || ::ioctl(fd, KVM_GET_SREGS, &s) != 0 ||
      ::ioctl(fd, KVM_GET_FPU, &f) != 0) {
    return false;
  }
  __u64* gpr[16] = {&r.rax, &r.rbx, &r.rcx, &r.rdx, &r.rsi, &r.rdi, &r.rbp, &r.rsp,
                            &r.r8,  &r.r9,  &r.r10, &r.r11, &r.r12, &r.r13, &r.r14, &r.r15};
  for (int i = 0; i < 16; ++i) *gpr[i] = in.get(reg::kRax + i);
  r.rip = in.get(reg::kRip);
  // Bit 1 of RFLAGS is always 1; KVM refuses nothing here, the CPU would.
  r.rflags = in.get(reg::kEflags) | 2;
  // Segment selectors are not written: a selector without its descriptor (which gdb cannot
  // say) is not a segment. The bases, control registers and EFER are.
  s.fs.base = in.get(reg::kFsBase);
  s.gs.base = in.get(reg::kGsBase);
  s.cr0 = in.get(reg::kCr0);
  s.cr2 = in.get(reg::kCr2);
  s.cr3 = in.get(reg::kCr3);
  s.cr4 = in.get(reg::kCr4);
  s.cr8 = in.get(reg::kCr8);
  s.efer = in.get(reg::kEfer);
  for (int i = 0; i < 8; ++i) std::memcpy(f.fpr[i], in.raw(reg::kSt0 + i).data(), 10);
  f.fcw = static_cast<std::uint16_t>(in.get(reg::kFctrl));
  f.fsw = static_cast<std::uint16_t>(in.get(reg::kFctrl + 1));
  for (int i = 0; i < 16; ++i) std::memcpy(f.xmm[i], in.raw(reg::kXmm0 + i).data(), 16);
  f.mxcsr = static_cast<std::uint32_t>(in.get(reg::kMxcsr));
  return ::ioctl(fd, KVM_SET_REGS, &r) == 0 && ::ioctl(fd, KVM_SET_SREGS, &s) == 0 &&
         ::ioctl(fd, KVM_SET_FPU, &f) == 0;
}

std::optional<std::uint64_t> KvmGdbTarget::translate(int cpu, std::uint64_t linear) {
  if (cpu < 0 || cpu >= cpu_count()) return std::nullopt;
  kvm_translation t{};
  t.linear_address = linear;
  if (::ioctl(fds_[static_cast<std::size_t>(cpu)], KVM_TRANSLATE, &t) != 0 || !t.valid) {
    ++stats_.translate_failures;
    return std::nullopt;
  }
  return t.physical_address;
}

std::size_t KvmGdbTarget::read_memory(int cpu, std::uint64_t addr, std::span<std::uint8_t> out,
                                      bool physical) {
  std::size_t done = 0;
  while (done < out.size()) {
    const std::uint64_t a = addr + done;
    if (a < addr) break;  // wrapped past the top of the address space
    const std::size_t chunk =
        static_cast<std::size_t>(std::min<std::uint64_t>(out.size() - done, kPage - a % kPage));
    std::uint64_t gpa = a;
    if (!physical) {
      const auto p = translate(cpu, a);
      if (!p) break;
      gpa = *p;
    }
    if (!mem_.read(gpa, std::as_writable_bytes(out.subspan(done, chunk)))) break;
    // A software breakpoint's int3 is ours, not the guest's: gdb sees the byte it replaced.
    {
      std::lock_guard lock(mu_);
      for (const auto& [lin, bp] : sw_breaks_) {
        (void)lin;
        if (bp.first >= gpa && bp.first < gpa + chunk) out[done + (bp.first - gpa)] = bp.second;
      }
    }
    done += chunk;
  }
  return done;
}

std::size_t KvmGdbTarget::write_memory(int cpu, std::uint64_t addr,
                                       std::span<const std::uint8_t> in, bool physical) {
  std::size_t done = 0;
  while (done < in.size()) {
    const std::uint64_t a = addr + done;
    if (a < addr) break;
    const std::size_t chunk =
        static_cast<std::size_t>(std::min<std::uint64_t>(in.size() - done, kPage - a % kPage));
    std::uint64_t gpa = a;
    if (!physical) {
      const auto p = translate(cpu, a);
      if (!p) break;
      gpa = *p;
    }
    if (!mem_.write(gpa, std::as_bytes(in.subspan(done, chunk)))) break;
    // Written under a breakpoint: the new byte is what goes back at its removal; int3 stays.
    {
      std::lock_guard lock(mu_);
      for (auto& [lin, bp] : sw_breaks_) {
        (void)lin;
        if (bp.first >= gpa && bp.first < gpa + chunk) {
          bp.second = in[done + (bp.first - gpa)];
          mem_.write_obj(bp.first, kInt3);
        }
      }
    }
    done += chunk;
  }
  return done;
}

BreakResult KvmGdbTarget::insert_breakpoint(BreakType type, std::uint64_t addr,
                                            std::uint64_t kind) {
  if (type == BreakType::kSoftware) {
    std::lock_guard lock(mu_);
    if (sw_breaks_.count(addr)) return BreakResult::kOk;
    const auto gpa = translate(0, addr);
    std::uint8_t orig = 0;
    if (!gpa || !mem_.read_obj(*gpa, orig) || !mem_.write_obj(*gpa, kInt3)) {
      return BreakResult::kError;
    }
    sw_breaks_[addr] = {*gpa, orig};
    return BreakResult::kOk;
  }
  // x86 has no read-only data breakpoint. An error, not the empty reply: gdb then says it
  // could not insert the watchpoint instead of running on without it.
  if (type == BreakType::kRead) return BreakResult::kError;
  const std::uint64_t len = type == BreakType::kHardware ? 1 : kind;
  if (!dr7_len(len) || addr % len != 0) return BreakResult::kError;
  for (HwSlot& s : hw_) {
    if (!s.used) {
      s = {true, type, addr, len};
      return BreakResult::kOk;
    }
  }
  return BreakResult::kError;  // all four debug registers taken
}

BreakResult KvmGdbTarget::remove_breakpoint(BreakType type, std::uint64_t addr,
                                            std::uint64_t kind) {
  if (type == BreakType::kSoftware) {
    std::lock_guard lock(mu_);
    const auto it = sw_breaks_.find(addr);
    if (it == sw_breaks_.end()) return BreakResult::kError;
    mem_.write_obj(it->second.first, it->second.second);
    sw_breaks_.erase(it);
    return BreakResult::kOk;
  }
  if (type == BreakType::kRead) return BreakResult::kUnsupported;
  const std::uint64_t len = type == BreakType::kHardware ? 1 : kind;
  for (HwSlot& s : hw_) {
    if (s.used && s.type == type && s.addr == addr && s.len == len) {
      s = {};
      return BreakResult::kOk;
    }
  }
  return BreakResult::kError;
}

bool KvmGdbTarget::set_guest_debug(int cpu, bool step) {
  kvm_guest_debug dbg{};
  std::uint64_t dr7 = 0;
  bool hw = false;
  for (std::size_t i = 0; i < hw_.size(); ++i) {
    const HwSlot& s = hw_[i];
    if (!s.used) continue;
    hw = true;
    dbg.arch.debugreg[i] = s.addr;
    const std::uint64_t len = s.type == BreakType::kHardware ? 0 : *dr7_len(s.len);
    dr7 |= (2ull << (2 * i)) | (dr7_rw(s.type) << (16 + 4 * i)) | (len << (18 + 4 * i));
  }
  bool sw = false;
  {
    std::lock_guard lock(mu_);
    sw = !sw_breaks_.empty();
  }
  if (hw) dr7 |= 0x600;  // GE and the reserved bit 10, as the SDM's examples set them
  dbg.arch.debugreg[7] = dr7;
  if (hw || sw || step) dbg.control = KVM_GUESTDBG_ENABLE;
  if (sw) dbg.control |= KVM_GUESTDBG_USE_SW_BP;
  if (hw) dbg.control |= KVM_GUESTDBG_USE_HW_BP;
  if (step) dbg.control |= KVM_GUESTDBG_SINGLESTEP;
  if (step && block_irq_on_step_) dbg.control |= KVM_GUESTDBG_BLOCKIRQ;
  return ::ioctl(fds_[static_cast<std::size_t>(cpu)], KVM_SET_GUEST_DEBUG, &dbg) == 0;
}

void KvmGdbTarget::resume(std::span<const ResumeAction> actions) {
  for (int cpu = 0; cpu < cpu_count(); ++cpu) {
    const bool step = static_cast<std::size_t>(cpu) < actions.size() &&
                      actions[static_cast<std::size_t>(cpu)].kind == ResumeKind::kStep;
    set_guest_debug(cpu, step);
  }
  hooks_.resume();
}

void KvmGdbTarget::interrupt() {
  hooks_.pause();
  note_stopped();
  if (hooks_.stopped) hooks_.stopped(StopEvent{0, 2, StopKind::kSignal, 0});
}

void KvmGdbTarget::clear_all() {
  {
    std::lock_guard lock(mu_);
    for (const auto& [lin, bp] : sw_breaks_) {
      (void)lin;
      mem_.write_obj(bp.first, bp.second);
    }
    sw_breaks_.clear();
    event_.reset();
  }
  hw_ = {};
  for (int cpu = 0; cpu < cpu_count(); ++cpu) set_guest_debug(cpu, false);
}

void KvmGdbTarget::detach() {
  clear_all();
  hooks_.resume();
}

void KvmGdbTarget::kill() { hooks_.end_run(0, "killed from gdb"); }

std::string KvmGdbTarget::describe() {
  const KvmGdbStats s = stats();
  std::size_t hw = 0;
  for (const HwSlot& h : hw_) hw += h.used ? 1 : 0;
  std::lock_guard lock(mu_);
  return std::to_string(sw_breaks_.size()) + " software breakpoints, " + std::to_string(hw) +
         " of 4 debug registers in use, " + std::to_string(s.debug_exits) + " debug exits, " +
         std::to_string(s.kvmclock_ctrl) + " kvmclock stop notices\n";
}

bool KvmGdbTarget::debug_exit(int cpu, int vcpu_fd, const kvm_debug_exit_arch& arch) {
  std::lock_guard lock(mu_);
  ++stats_.debug_exits;
  if (arch.exception == kBpVector && !sw_breaks_.count(arch.pc)) {
    // The guest's own int3 (KVM_GUESTDBG_USE_SW_BP takes every one): handed back to it as the
    // #BP it raised, as QEMU does; KVM re-injects it as a soft exception past the int3.
    kvm_vcpu_events ev{};
    if (::ioctl(vcpu_fd, KVM_GET_VCPU_EVENTS, &ev) == 0) {
      ev.exception.injected = 1;
      ev.exception.nr = kBpVector;
      ev.exception.has_error_code = 0;
      ev.flags = 0;
      if (::ioctl(vcpu_fd, KVM_SET_VCPU_EVENTS, &ev) == 0) {
        ++stats_.guest_int3_reinjected;
        return false;
      }
    }
  }
  if (!event_) event_ = std::pair{cpu, arch};
  return true;
}

std::optional<StopEvent> KvmGdbTarget::take_stop() {
  std::optional<std::pair<int, kvm_debug_exit_arch>> e;
  {
    std::lock_guard lock(mu_);
    e.swap(event_);
  }
  if (!e) return std::nullopt;
  const auto& [cpu, arch] = *e;
  StopEvent ev{cpu, 5, StopKind::kSignal, 0};
  if (arch.exception == kBpVector) {
    ev.kind = StopKind::kSwBreak;
  } else if (arch.exception == kDbVector) {
    for (std::size_t i = 0; i < hw_.size(); ++i) {
      if (!((arch.dr6 >> i) & 1) || !hw_[i].used) continue;
      switch (hw_[i].type) {
        case BreakType::kHardware: ev.kind = StopKind::kHwBreak; break;
        case BreakType::kWrite: ev.kind = StopKind::kWatch; break;
        case BreakType::kAccess: ev.kind = StopKind::kAWatch; break;
        default: break;
      }
      ev.addr = hw_[i].addr;
      return ev;
    }
    (void)kDr6SingleStep;  // a step (DR6.BS) or anything else: a plain SIGTRAP
  }
  return ev;
}

void KvmGdbTarget::note_stopped() {
  for (const int fd : fds_) {
    if (::ioctl(fd, KVM_KVMCLOCK_CTRL, 0) == 0) ++stats_.kvmclock_ctrl;
  }
}

KvmGdbStats KvmGdbTarget::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace minivmm::vmm::gdb
