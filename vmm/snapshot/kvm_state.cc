#include "vmm/snapshot/kvm_state.h"

#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "devices/bus/device_state.h"
#include "devices/log/log.h"
#include "vmm/snapshot/snapshot_file.h"

namespace minivmm::vmm {
namespace {

using devices::StateReader;
using devices::StateWriter;

// The variable-length structs by their header size, as kvm.h does for KVM_SET_MSRS: their
// flexible arrays make sizeof() of the C struct the header's alone.
constexpr unsigned long kKvmGetMsrIndexList = _IOC(_IOC_READ | _IOC_WRITE, KVMIO, 0x02, 4);
constexpr std::size_t kMaxMsrs = 4096;
constexpr std::size_t kMaxXsaveBytes = 1 << 20;

[[noreturn]] void kvm_failed(const char* what, int index) {
  const std::string who = index < 0 ? "the VM" : "vCPU " + std::to_string(index);
  throw SnapshotError(std::string(what) + " for " + who + ": " + std::strerror(errno));
}

template <typename T>
void put_raw(StateWriter& out, const T& v) {
  out.bytes(std::span(reinterpret_cast<const std::uint8_t*>(&v), sizeof v));
}
template <typename T>
T get_raw(StateReader& in) {
  T v{};
  in.fixed_bytes(std::span(reinterpret_cast<std::uint8_t*>(&v), sizeof v));
  return v;
}

template <typename T>
T get_ioctl(int fd, unsigned long req, const char* what, int index) {
  T v{};
  if (::ioctl(fd, req, &v) < 0) kvm_failed(what, index);
  return v;
}
template <typename T>
void set_ioctl(int fd, unsigned long req, const T& v, const char* what, int index) {
  if (::ioctl(fd, req, &v) < 0) kvm_failed(what, index);
}

// A kvm_msrs with room for `n` entries, laid out by hand: the header's flexible arrays come
// with an empty struct that is 1 byte in C++, which moves `entries` (and kvm_msr_list's
// `indices`) past where the kernel puts them.
constexpr std::size_t kMsrsHeader = 8;    // u32 nmsrs, u32 pad
constexpr std::size_t kMsrListHeader = 4;  // u32 nmsrs
struct MsrBuffer {
  explicit MsrBuffer(std::size_t n) : raw(kMsrsHeader + n * sizeof(kvm_msr_entry)) {
    const auto count = static_cast<std::uint32_t>(n);
    std::memcpy(raw.data(), &count, sizeof count);
  }
  void* get() noexcept { return raw.data(); }
  std::uint8_t* entries() noexcept { return raw.data() + kMsrsHeader; }
  std::vector<std::uint8_t> raw;
};

std::vector<std::uint32_t> msr_index_list(const Kvm& kvm) {
  std::vector<std::uint8_t> buf(kMsrListHeader + kMaxMsrs * sizeof(std::uint32_t));
  std::uint32_t n = kMaxMsrs;
  std::memcpy(buf.data(), &n, sizeof n);
  if (::ioctl(kvm.fd(), kKvmGetMsrIndexList, buf.data()) < 0) {
    kvm_failed("KVM_GET_MSR_INDEX_LIST", -1);
  }
  std::memcpy(&n, buf.data(), sizeof n);
  std::vector<std::uint32_t> out(std::min<std::size_t>(n, kMaxMsrs));
  std::memcpy(out.data(), buf.data() + kMsrListHeader, out.size() * sizeof(std::uint32_t));
  return out;
}

// KVM_GET_MSRS / KVM_SET_MSRS stop at the first MSR they cannot do and return how many they
// did: go on past it, one refusal at a time.
template <typename Step>
std::uint32_t each_msr_batch(std::vector<kvm_msr_entry>& entries, Step step) {
  std::uint32_t refused = 0;
  std::size_t pos = 0;
  while (pos < entries.size()) {
    const std::size_t n = entries.size() - pos;
    MsrBuffer b(n);
    std::memcpy(b.entries(), entries.data() + pos, n * sizeof(kvm_msr_entry));
    const int done = step(b.get());
    if (done < 0) return static_cast<std::uint32_t>(-1);
    std::memcpy(entries.data() + pos, b.entries(),
                static_cast<std::size_t>(done) * sizeof(kvm_msr_entry));
    pos += static_cast<std::size_t>(done);
    if (pos < entries.size()) {
      entries[pos].index = ~0u;  // marks the one refused
      ++refused;
      ++pos;
    }
  }
  return refused;
}

constexpr std::size_t kMaxMpState = KVM_MP_STATE_AP_RESET_HOLD;

}  // namespace

KvmStateCaps probe_kvm_state_caps(const Kvm& kvm) {
  KvmStateCaps caps;
  caps.xsave = kvm.check_extension(KVM_CAP_XSAVE) > 0;
  const int xsave2 = kvm.check_extension(KVM_CAP_XSAVE2);
  caps.xsave2 = xsave2 > 0;
  caps.xsave_bytes = xsave2 > static_cast<int>(kKvmXsaveSize) ? static_cast<std::size_t>(xsave2)
                                                               : kKvmXsaveSize;
  caps.xcrs = kvm.check_extension(KVM_CAP_XCRS) > 0;
  caps.msr_indices = msr_index_list(kvm);
  return caps;
}

std::vector<std::uint8_t> save_vcpu_state(const KvmStateCaps& caps, int fd, int index,
                                          VcpuStateStats* stats) {
  StateWriter out;
  const auto mp = get_ioctl<kvm_mp_state>(fd, KVM_GET_MP_STATE, "KVM_GET_MP_STATE", index);
  out.u32(mp.mp_state);
  put_raw(out, get_ioctl<kvm_regs>(fd, KVM_GET_REGS, "KVM_GET_REGS", index));
  put_raw(out, get_ioctl<kvm_sregs>(fd, KVM_GET_SREGS, "KVM_GET_SREGS", index));
  const bool xsave = caps.xsave;
  out.boolean(xsave);
  if (xsave) {
    // KVM_SET_XSAVE reads the same size back (the vCPU's uabi size) on restore.
    std::vector<std::uint8_t> area(caps.xsave_bytes);
    const unsigned long get = caps.xsave2 ? kKvmGetXsave2 : kKvmGetXsave;
    if (::ioctl(fd, get, area.data()) < 0) {
      kvm_failed(caps.xsave2 ? "KVM_GET_XSAVE2" : "KVM_GET_XSAVE", index);
    }
    out.bytes(area);
  } else {
    put_raw(out, get_ioctl<kvm_fpu>(fd, KVM_GET_FPU, "KVM_GET_FPU", index));
  }
  const bool xcrs = caps.xcrs;
  out.boolean(xcrs);
  if (xcrs) put_raw(out, get_ioctl<kvm_xcrs>(fd, KVM_GET_XCRS, "KVM_GET_XCRS", index));
  put_raw(out, get_ioctl<kvm_debugregs>(fd, KVM_GET_DEBUGREGS, "KVM_GET_DEBUGREGS", index));
  put_raw(out, get_ioctl<kvm_lapic_state>(fd, KVM_GET_LAPIC, "KVM_GET_LAPIC", index));

  const std::vector<std::uint32_t>& indices = caps.msr_indices;
  std::vector<kvm_msr_entry> msrs(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) msrs[i].index = indices[i];
  const std::uint32_t refused = each_msr_batch(
      msrs, [&](void* m) { return ::ioctl(fd, kKvmGetMsrs, m); });
  if (refused == static_cast<std::uint32_t>(-1)) kvm_failed("KVM_GET_MSRS", index);
  std::uint32_t kept = 0;
  for (const kvm_msr_entry& e : msrs) kept += e.index != ~0u ? 1 : 0;
  out.u32(kept);
  for (const kvm_msr_entry& e : msrs) {
    if (e.index == ~0u) continue;  // listed but not readable on this vCPU (not in its CPUID)
    out.u32(e.index);
    out.u64(e.data);
  }
  if (stats) stats->msrs = kept;
  put_raw(out, get_ioctl<kvm_vcpu_events>(fd, KVM_GET_VCPU_EVENTS, "KVM_GET_VCPU_EVENTS", index));
  return out.data();
}

void load_vcpu_state(const KvmStateCaps& caps, int fd, int index, std::span<const std::uint8_t> record,
                     VcpuStateStats* stats) {
  StateReader in(record, "vcpu" + std::to_string(index));
  // Everything is read and checked for shape before KVM is told any of it.
  kvm_mp_state mp{};
  mp.mp_state = in.u32();
  if (mp.mp_state > kMaxMpState) in.fail("MP state " + std::to_string(mp.mp_state));
  const auto regs = get_raw<kvm_regs>(in);
  const auto sregs = get_raw<kvm_sregs>(in);
  const bool xsave = in.boolean();
  std::vector<std::uint8_t> xsave_area;
  kvm_fpu fpu{};
  if (xsave) {
    xsave_area = in.bytes(kMaxXsaveBytes);
  } else {
    fpu = get_raw<kvm_fpu>(in);
  }
  const bool has_xcrs = in.boolean();
  kvm_xcrs xcrs{};
  if (has_xcrs) xcrs = get_raw<kvm_xcrs>(in);
  if (has_xcrs && xcrs.nr_xcrs > KVM_MAX_XCRS) in.fail("XCR count " + std::to_string(xcrs.nr_xcrs));
  const auto dbg = get_raw<kvm_debugregs>(in);
  const auto lapic = get_raw<kvm_lapic_state>(in);
  const std::uint32_t n = in.u32();
  if (n > kMaxMsrs) in.fail(std::to_string(n) + " MSRs");
  std::vector<kvm_msr_entry> msrs(n);
  for (kvm_msr_entry& e : msrs) {
    e.index = in.u32();
    e.data = in.u64();
  }
  const auto events = get_raw<kvm_vcpu_events>(in);
  in.expect_end();
  if (xsave && (!caps.xsave || xsave_area.size() != caps.xsave_bytes)) {
    throw SnapshotError("vcpu" + std::to_string(index) + ": the snapshot's XSAVE area is " +
                        std::to_string(xsave_area.size()) + " bytes; this host's KVM uses " +
                        std::to_string(caps.xsave ? caps.xsave_bytes : 0) +
                        " (another CPU's register state)");
  }
  if (has_xcrs && !caps.xcrs) {
    throw SnapshotError("vcpu" + std::to_string(index) + ": the snapshot has XCRs and this "
                        "host's KVM has no KVM_CAP_XCRS");
  }

  set_ioctl(fd, KVM_SET_MP_STATE, mp, "KVM_SET_MP_STATE", index);
  set_ioctl(fd, KVM_SET_REGS, regs, "KVM_SET_REGS", index);
  set_ioctl(fd, KVM_SET_SREGS, sregs, "KVM_SET_SREGS", index);
  if (xsave) {
    if (::ioctl(fd, kKvmSetXsave, xsave_area.data()) < 0) kvm_failed("KVM_SET_XSAVE", index);
  } else {
    set_ioctl(fd, KVM_SET_FPU, fpu, "KVM_SET_FPU", index);
  }
  if (has_xcrs) set_ioctl(fd, KVM_SET_XCRS, xcrs, "KVM_SET_XCRS", index);
  set_ioctl(fd, KVM_SET_DEBUGREGS, dbg, "KVM_SET_DEBUGREGS", index);
  set_ioctl(fd, KVM_SET_LAPIC, lapic, "KVM_SET_LAPIC", index);
  std::vector<kvm_msr_entry> wanted = msrs;
  const std::uint32_t refused = each_msr_batch(
      msrs, [&](void* m) { return ::ioctl(fd, kKvmSetMsrs, m); });
  if (refused == static_cast<std::uint32_t>(-1)) kvm_failed("KVM_SET_MSRS", index);
  for (std::size_t i = 0; i < msrs.size(); ++i) {
    if (msrs[i].index == ~0u) {
      log::warn("restore: vCPU {}: this host's KVM refused MSR {:#x} = {:#x}", index,
                wanted[i].index, wanted[i].data);
    }
  }
  if (stats) {
    stats->msrs = n - refused;
    stats->msrs_refused = refused;
  }
  set_ioctl(fd, KVM_SET_VCPU_EVENTS, events, "KVM_SET_VCPU_EVENTS", index);
}

std::uint64_t read_kvm_clock(int vm_fd) {
  return get_ioctl<kvm_clock_data>(vm_fd, KVM_GET_CLOCK, "KVM_GET_CLOCK", -1).clock;
}

std::optional<std::uint64_t> guest_kvmclock_ns(int vcpu_fd, devices::GuestMemory ram) {
  constexpr std::uint32_t kMsrTsc = 0x10, kMsrKvmSystemTime = 0x12,
                          kMsrKvmSystemTimeNew = 0x4b564d01;
  std::vector<kvm_msr_entry> msrs(3);
  msrs[0].index = kMsrTsc;
  msrs[1].index = kMsrKvmSystemTimeNew;
  msrs[2].index = kMsrKvmSystemTime;
  MsrBuffer b(msrs.size());
  std::memcpy(b.entries(), msrs.data(), msrs.size() * sizeof(kvm_msr_entry));
  const int got = ::ioctl(vcpu_fd, kKvmGetMsrs, b.get());
  if (got < 2) return std::nullopt;
  std::memcpy(msrs.data(), b.entries(), static_cast<std::size_t>(got) * sizeof(kvm_msr_entry));
  std::uint64_t area = msrs[1].data;
  if ((area & 1) == 0 && got == 3) area = msrs[2].data;
  if ((area & 1) == 0) return std::nullopt;  // kvmclock not enabled by the guest
  // struct pvclock_vcpu_time_info: version, pad, tsc_timestamp, system_time, mul, shift.
  struct {
    std::uint32_t version, pad0;
    std::uint64_t tsc_timestamp, system_time;
    std::uint32_t mul;
    std::int8_t shift;
    std::uint8_t flags, pad[2];
  } pv{};
  static_assert(sizeof pv == 32);
  if (!ram.read(area & ~std::uint64_t{1}, std::as_writable_bytes(std::span(&pv, 1)))) {
    return std::nullopt;
  }
  if (pv.version & 1) return std::nullopt;  // the vCPU is parked: KVM is not mid-update
  std::uint64_t delta = msrs[0].data - pv.tsc_timestamp;
  if (pv.shift < 0) {
    delta >>= -pv.shift;
  } else {
    delta <<= pv.shift;
  }
  // (delta * mul) >> 32 in 64 bits: the high and low halves of delta scaled apart.
  const std::uint64_t scaled = (delta >> 32) * pv.mul + (((delta & 0xffffffffu) * pv.mul) >> 32);
  return pv.system_time + scaled;
}

kvm_pit_state2 read_kvm_pit(int vm_fd) {
  return get_ioctl<kvm_pit_state2>(vm_fd, KVM_GET_PIT2, "KVM_GET_PIT2", -1);
}

void set_kvm_pit(int vm_fd, const kvm_pit_state2& state) {
  set_ioctl(vm_fd, KVM_SET_PIT2, state, "KVM_SET_PIT2", -1);
}

void set_kvm_clock(int vm_fd, std::uint64_t ns) {
  kvm_clock_data clock{};
  clock.clock = ns;
  set_ioctl(vm_fd, KVM_SET_CLOCK, clock, "KVM_SET_CLOCK", -1);
}

std::vector<std::uint8_t> save_vm_state(int vm_fd, bool kernel_pit, std::uint64_t kvmclock_ns) {
  StateWriter out;
  for (std::uint32_t chip = KVM_IRQCHIP_PIC_MASTER; chip <= KVM_IRQCHIP_IOAPIC; ++chip) {
    kvm_irqchip c{};
    c.chip_id = chip;
    if (::ioctl(vm_fd, KVM_GET_IRQCHIP, &c) < 0) kvm_failed("KVM_GET_IRQCHIP", -1);
    put_raw(out, c);
  }
  out.u64(kvmclock_ns);
  out.boolean(kernel_pit);
  if (kernel_pit) put_raw(out, get_ioctl<kvm_pit_state2>(vm_fd, KVM_GET_PIT2, "KVM_GET_PIT2", -1));
  return out.data();
}

void load_vm_state(int vm_fd, bool kernel_pit, std::span<const std::uint8_t> record) {
  StateReader in(record, "kvm");
  kvm_irqchip chips[3]{};
  for (std::uint32_t chip = 0; chip < 3; ++chip) {
    chips[chip] = get_raw<kvm_irqchip>(in);
    if (chips[chip].chip_id != chip) in.fail("irqchip " + std::to_string(chip) + " is misnamed");
  }
  const std::uint64_t clock = in.u64();
  const bool pit = in.boolean();
  if (pit != kernel_pit) in.fail(pit ? "KVM's PIT without --pit kvm" : "no KVM PIT");
  kvm_pit_state2 pit_state{};
  if (pit) pit_state = get_raw<kvm_pit_state2>(in);
  in.expect_end();
  for (const kvm_irqchip& c : chips) set_ioctl(vm_fd, KVM_SET_IRQCHIP, c, "KVM_SET_IRQCHIP", -1);
  set_kvm_clock(vm_fd, clock);
  if (pit) set_ioctl(vm_fd, KVM_SET_PIT2, pit_state, "KVM_SET_PIT2", -1);
}

}  // namespace minivmm::vmm
