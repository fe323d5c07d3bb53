// Machine's snapshot and restore (docs/snapshot.md): which sections a snapshot has and in what
// order a restore loads them.
//
// Sections: "config" (snapshot_config.h), "cpuid" (the CPUID policy's entries, to refuse a host
// that offers another CPU), "vm_clock" (where guest time stood), "kvm" (irqchip, kvmclock, KVM's
// PIT), "vcpu0".."vcpuN", then one "dev:<key>" per device: the board's in slot order, then the
// virtio devices as "dev:virtio_<label>".
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

#include "devices/bus/device_state.h"
#include "devices/log/log.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/snapshot_config.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

using devices::StateReader;
using devices::StateWriter;

std::vector<std::uint8_t> save_cpuid(const std::vector<kvm_cpuid_entry2>& entries) {
  StateWriter out;
  out.u32(static_cast<std::uint32_t>(entries.size()));
  for (const kvm_cpuid_entry2& e : entries) {
    out.u32(e.function);
    out.u32(e.index);
    out.u32(e.flags);
    out.u32(e.eax);
    out.u32(e.ebx);
    out.u32(e.ecx);
    out.u32(e.edx);
  }
  return out.data();
}

// The snapshot's CPU must be the one this host offers under the same model and mask: a guest
// that found AVX at boot would fault on a host without it.
void check_cpuid(std::span<const std::uint8_t> record, const std::vector<kvm_cpuid_entry2>& here) {
  StateReader in(record, "cpuid");
  const std::uint32_t n = in.u32();
  if (n > 1024) in.fail(std::to_string(n) + " entries");
  std::vector<kvm_cpuid_entry2> saved(n);
  for (kvm_cpuid_entry2& e : saved) {
    e.function = in.u32();
    e.index = in.u32();
    e.flags = in.u32();
    e.eax = in.u32();
    e.ebx = in.u32();
    e.ecx = in.u32();
    e.edx = in.u32();
  }
  in.expect_end();
  // KVM_GET_SUPPORTED_CPUID runs CPUID on whichever host CPU the process is on: the APIC ids
  // in it are that CPU's, and differ from run to run on the same host. They say nothing of the
  // CPU model (and each vCPU gets its own, cpuid_for_vcpu()).
  auto model = [](kvm_cpuid_entry2 e) {
    if (e.function == 1) e.ebx &= 0x00ffffffu;
    if (e.function == 0xb || e.function == 0x1f) e.edx = 0;
    if (e.function == 0x8000001e) e.eax = 0;
    return e;
  };
  auto same = [&model](const kvm_cpuid_entry2& x, const kvm_cpuid_entry2& y) {
    const kvm_cpuid_entry2 a = model(x), b = model(y);
    return a.function == b.function && a.index == b.index && a.eax == b.eax && a.ebx == b.ebx &&
           a.ecx == b.ecx && a.edx == b.edx;
  };
  if (saved.size() != here.size()) {
    throw SnapshotError("the snapshot was taken on another CPU model than this host offers (" +
                        std::to_string(saved.size()) + " CPUID leaves there, " +
                        std::to_string(here.size()) + " here)");
  }
  for (std::size_t i = 0; i < saved.size(); ++i) {
    if (!same(saved[i], here[i])) {
      char leaf[48];
      std::snprintf(leaf, sizeof leaf, "%#x.%u", saved[i].function, saved[i].index);
      throw SnapshotError(std::string("the snapshot was taken on another CPU model than this "
                                      "host offers (CPUID leaf ") + leaf + " differs)");
    }
  }
}

std::vector<std::uint8_t> record_of(const devices::StatefulDevice& d) {
  StateWriter out;
  d.save_state(out);
  return out.data();
}

}  // namespace

std::vector<std::pair<std::string, devices::StatefulDevice*>> Machine::stateful_devices() const {
  std::vector<std::pair<std::string, devices::StatefulDevice*>> out;
  for (devices::StatefulDevice* d : board_->stateful()) {
    out.emplace_back("dev:" + std::string(d->state_key()), d);
  }
  for (auto& [key, d] : virtio_->stateful()) out.emplace_back("dev:" + key, d);
  return out;
}

std::vector<SnapshotSection> Machine::save_sections() const {
  std::vector<SnapshotSection> s;
  // The drives as the files they opened (absolute, symlinks resolved): a restore in another
  // folder opens the same ones.
  Config saved = config_;
  for (std::size_t i = 0; i < saved.drives.size() && i < snap_.drive_paths.size(); ++i) {
    saved.drives[i].path = snap_.drive_paths[i];
  }
  s.push_back({"config", save_machine_config(saved, snap_.drive_sizes)});
  s.push_back({"cpuid", save_cpuid(vcpus_->cpuid())});
  StateWriter clock;
  clock.i64(loop_->vm_clock.now().count());
  s.push_back({"vm_clock", clock.data()});
  // What the firmware knows and no device holds: where it put the FACS, whose waking vector an
  // S3 wake of the restored guest jumps to.
  StateWriter firmware;
  firmware.u64(facs_addr());
  s.push_back({"firmware", firmware.data()});
  s.push_back({"kvm", save_vm_state(vm_->vm.fd(), config_.pit == PitMode::kKvm,
                                    hold_.kvmclock)});
  for (const auto& v : vcpus_->all()) {
    s.push_back({"vcpu" + std::to_string(v->index()), save_vcpu_state(snap_.kvm_caps, v->fd(), v->index())});
  }
  for (const auto& [name, dev] : stateful_devices()) s.push_back({name, record_of(*dev)});
  return s;
}

nlohmann::json Machine::snapshot(const std::string& path, bool resume_after) {
  // Renamed onto `path`: it must be a regular file or nothing yet, and never one of the run's
  // inputs (a snapshot named like the guest's disk would replace the disk).
  // A JSON string may hold a NUL, where the file system would cut the name short.
  if (path.find('\0') != std::string::npos) throw SnapshotError("the path holds a NUL byte");
  // Sleep is no state a record holds: restored, the guest would run on past its SLP_EN write
  // as if it had woken, and the wake's FACS vector is not in the file either.
  if (hold_.asleep) throw SnapshotError("the guest is asleep (ACPI S3): wake it first");
  struct stat target {};
  if (::stat(path.c_str(), &target) == 0) {
    if (!S_ISREG(target.st_mode)) throw SnapshotError("'" + path + "' is not a regular file");
    for (const auto& [dev, ino] : snap_.input_inodes) {
      if (dev == target.st_dev && ino == target.st_ino) {
        throw SnapshotError("'" + path + "' is one of this VM's input files (kernel, initrd or "
                            "drive); a snapshot never replaces one");
      }
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const bool was_paused = paused();
  pause();
  const auto t_paused = std::chrono::steady_clock::now();
  SnapshotWriteStats st;
  try {
    // A disk request in flight would complete into guest memory after it was written.
    virtio_->quiesce();
    st = write_snapshot_file(path, save_sections(), inputs_->ram.memory(),
                             inputs_->ram.anonymous());
  } catch (const std::exception& e) {
    if (resume_after || !was_paused) resume();
    throw SnapshotError(e.what());
  }
  const auto t_written = std::chrono::steady_clock::now();
  if (resume_after) resume();
  ++snap_.snapshots_taken;
  snap_.last_snapshot_ms = std::chrono::duration<double, std::milli>(t_written - t0).count();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  log::info("snapshot: {} ({} bytes, {} of guest memory written) in {:.1f} ms", path,
            st.file_bytes, st.memory_written, ms(t_written - t0));
  return {{"path", path},
          {"file_bytes", st.file_bytes},
          {"memory_written_bytes", st.memory_written},
          {"pause_ms", ms(t_paused - t0)},
          {"write_ms", ms(t_written - t_paused)},
          {"vm_clock_ns", loop_->vm_clock.now().count()}};
}

// Every record of `snap` into this machine: devices, then KVM's VM and vCPU state, with
// vm_clock standing at the snapshot's instant. The restore's and the reset's common part.
void Machine::load_records(const SnapshotFile& snap, std::int64_t vm_now) {
  // Paused before anything loads: the vCPUs park before their first KVM_RUN, the devices' host
  // timers stay withdrawn (the PIT's), and vm_clock stands at the snapshot's instant, so every
  // deadline a device re-arms from its record means what it meant.
  vcpus_->pause();
  const auto pausable = board_->pausable();
  for (devices::PausableDevice* d : pausable) d->pause();
  loop_->vm_clock.set_paused_at(timers::Nanos{vm_now});
  for (const auto& [name, d] : stateful_devices()) {
    StateReader in(snap.meta.section(name).data, name);
    d->load_state(in);
  }
  const auto& kvm = snap.meta.section("kvm").data;
  load_vm_state(vm_->vm.fd(), config_.pit == PitMode::kKvm, kvm);
  for (const auto& v : vcpus_->all()) {
    VcpuStateStats vs;
    load_vcpu_state(snap_.kvm_caps, v->fd(), v->index(),
                    snap.meta.section("vcpu" + std::to_string(v->index())).data, &vs);
  }
  hold_.kvmclock = read_kvm_clock(vm_->vm.fd());
  // What was loaded is what the resume brings back: a pause takes what stands now (KVM's PIT,
  // loaded above with the VM's state and counting host time since, is set again at the resume).
  for (devices::PausableDevice* d : pausable) d->pause();
  loop_->dynticks->rearm();
}

void Machine::restore_from(const SnapshotFile& snap) {
  try {
    check_cpuid(snap.meta.section("cpuid").data, vcpus_->cpuid());
    // Every section must be one this machine has, and every device of it must have one.
    const auto devices = stateful_devices();
    for (const SnapshotSection& s : snap.meta.sections) {
      const bool fixed = s.name == "config" || s.name == "cpuid" || s.name == "vm_clock" ||
                         s.name == "kvm" || s.name == "firmware";
      bool vcpu = false;
      for (const auto& v : vcpus_->all()) vcpu = vcpu || s.name == "vcpu" + std::to_string(v->index());
      bool device = false;
      for (const auto& [name, d] : devices) device = device || s.name == name;
      if (!fixed && !vcpu && !device) {
        throw SnapshotError("section '" + s.name + "' is for a device this configuration lacks");
      }
    }
    StateReader clock(snap.meta.section("vm_clock").data, "vm_clock");
    const std::int64_t vm_now = clock.i64();
    clock.expect_end();
    if (vm_now < 0) clock.fail("a negative vm_clock");

    if (config_.mailbox_bytes != 0 &&
        config_.mailbox_gpa + config_.mailbox_bytes > inputs_->ram.memory().bytes().size()) {
      throw VmmError(ExitCode::kUsage, "--mailbox: past the end of the guest's " +
                                           std::to_string(inputs_->ram.memory().bytes().size()) +
                                           " bytes of RAM");
    }
    // An older file has no firmware section: its guest's S3 wake finds no vector (a reset).
    for (const SnapshotSection& s : snap.meta.sections) {
      if (s.name != "firmware") continue;
      StateReader fw(s.data, "firmware");
      const std::uint64_t facs = fw.u64();
      fw.expect_end();
      if (facs != 0 && (facs % 64 != 0 || !inputs_->ram.memory().contains(facs, 64))) {
        fw.fail("a FACS at " + std::to_string(facs) + ", not 64-byte aligned inside guest RAM");
      }
      snap_.facs_addr = facs;
    }
    load_records(snap, vm_now);
    snap_.vm_now = vm_now;
    if (const devices::I8254Pit* pit = board_->pit().pit()) snap_.ticks_at_start = pit->stats().ticks_injected;
    snap_.restored = true;
  } catch (const SnapshotError& e) {
    throw VmmError(ExitCode::kBadKernel, "--restore: " + snap.path + ": " + e.what());
  } catch (const devices::StateError& e) {
    throw VmmError(ExitCode::kBadKernel, "--restore: " + snap.path + ": " + e.what());
  }
}

nlohmann::json Machine::reset() {
  if (!snap_.from) {
    throw SnapshotError("this guest was not restored from a snapshot (--restore): nothing to "
                        "reset to");
  }
  if (hold_.asleep) throw SnapshotError("the guest is asleep (ACPI S3): wake it first");
  const auto t0 = std::chrono::steady_clock::now();
  const bool was_paused = paused();
  pause();
  // A disk request in flight would complete into memory the reset is about to drop.
  virtio_->quiesce();
  const auto t_paused = std::chrono::steady_clock::now();
  const auto drop = inputs_->ram.drop_written_pages(config_.mailbox_gpa,
                                                    config_.mailbox_gpa + config_.mailbox_bytes);
  const auto t_dropped = std::chrono::steady_clock::now();
  try {
    load_records(*snap_.from, snap_.vm_now);
  } catch (const std::exception& e) {
    // The records loaded at the restore; one that fails now leaves a machine half of the
    // snapshot's and half the run's: that guest must not run on.
    request_stop(ExitCode::kHostFailure, std::string("reset failed: ") + e.what());
    throw SnapshotError(std::string("the machine could not load its snapshot again (the run "
                                    "ends): ") + e.what());
  }
  const auto t_loaded = std::chrono::steady_clock::now();
  // The rate's base, as at the restore: the PIT's counts went back with its record.
  if (const devices::I8254Pit* pit = board_->pit().pit()) snap_.ticks_at_start = pit->stats().ticks_injected;
  if (!was_paused) resume();
  const auto t_done = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  ++snap_.resets;
  snap_.reset_pages_dropped += drop.pages_dropped;
  snap_.last_reset_ms = ms(t_done - t0);
  log::debug("reset: {} pages dropped in {} ranges, {:.3f} ms", drop.pages_dropped, drop.ranges,
             snap_.last_reset_ms);
  return {{"reset_ms", snap_.last_reset_ms},
          {"pause_ms", ms(t_paused - t0)},
          {"drop_ms", ms(t_dropped - t_paused)},
          {"load_ms", ms(t_loaded - t_dropped)},
          {"resume_ms", ms(t_done - t_loaded)},
          {"pages_dropped", drop.pages_dropped},
          {"pages_scanned", drop.pages_scanned},
          {"written_pages_by", drop.scan_ioctl ? "PAGEMAP_SCAN" : "pagemap read"},
          {"state", was_paused ? "paused" : "running"},
          {"vm_clock_ns", loop_->vm_clock.now().count()}};
}

namespace {

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const std::uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) throw std::invalid_argument("\"write\" has an odd number of hex digits");
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::invalid_argument("\"write\" holds a character that is no hex digit");
  };
  std::vector<std::uint8_t> out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::uint8_t>(digit(hex[2 * i]) << 4 | digit(hex[2 * i + 1]));
  }
  return out;
}

}  // namespace

nlohmann::json Machine::mailbox(const nlohmann::json& request) {
  if (config_.mailbox_bytes == 0) throw std::invalid_argument("no --mailbox was given");
  const auto offset = request.find("offset");
  std::uint64_t at = 0;
  if (offset != request.end()) {
    if (!offset->is_number_unsigned()) throw std::invalid_argument("\"offset\" is a byte count");
    at = offset->get<std::uint64_t>();
  }
  const auto read = request.find("read");
  const auto write = request.find("write");
  if ((read == request.end()) == (write == request.end())) {
    throw std::invalid_argument("mailbox takes one of \"read\" (a length) or \"write\" (hex)");
  }
  auto check = [&](std::uint64_t len) {
    if (at > config_.mailbox_bytes || len > config_.mailbox_bytes - at) {
      throw std::invalid_argument("past the mailbox's " + std::to_string(config_.mailbox_bytes) +
                                  " bytes");
    }
  };
  auto ram = inputs_->ram.memory().bytes();
  auto* box = reinterpret_cast<std::uint8_t*>(ram.data()) + config_.mailbox_gpa;
  if (read != request.end()) {
    if (!read->is_number_unsigned()) throw std::invalid_argument("\"read\" is a byte count");
    const auto len = read->get<std::uint64_t>();
    check(len);
    return {{"hex", to_hex({box + at, static_cast<std::size_t>(len)})}};
  }
  if (!write->is_string()) throw std::invalid_argument("\"write\" is a hex string");
  const auto bytes = from_hex(write->get<std::string>());
  check(bytes.size());
  std::memcpy(box + at, bytes.data(), bytes.size());
  return {{"written", bytes.size()}};
}

}  // namespace minivmm::vmm
