// Machine's snapshot and restore (docs/snapshot.md): which sections a snapshot has and in what
// order a restore loads them.
//
// Sections: "config" (snapshot_config.h), "cpuid" (the CPUID policy's entries, to refuse a host
// that offers another CPU), "vm_clock" (where guest time stood), "kvm" (irqchip, kvmclock, KVM's
// PIT), "vcpu0".."vcpuN", then one "dev:<key>" per device: the board's in slot order, then the
// virtio devices as "dev:virtio_<label>".
#include <sys/stat.h>

#include <chrono>

#include "devices/bus/device_state.h"
#include "devices/log/log.h"
#include "vmm/machine/machine.h"
#include "vmm/snapshot/snapshot_config.h"
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
  for (std::size_t i = 0; i < saved.drives.size() && i < drive_paths_.size(); ++i) {
    saved.drives[i].path = drive_paths_[i];
  }
  s.push_back({"config", save_machine_config(saved, drive_sizes_)});
  s.push_back({"cpuid", save_cpuid(vcpus_->cpuid())});
  StateWriter clock;
  clock.i64(loop_->vm_clock.now().count());
  s.push_back({"vm_clock", clock.data()});
  s.push_back({"kvm", save_vm_state(vm_->vm.fd(), config_.pit == PitMode::kKvm,
                                    paused_kvmclock_)});
  for (const auto& v : vcpus_->all()) {
    s.push_back({"vcpu" + std::to_string(v->index()), save_vcpu_state(kvm_caps_, v->fd(), v->index())});
  }
  for (const auto& [name, dev] : stateful_devices()) s.push_back({name, record_of(*dev)});
  return s;
}

nlohmann::json Machine::snapshot(const std::string& path, bool resume_after) {
  // Renamed onto `path`: it must be a regular file or nothing yet, and never one of the run's
  // inputs (a snapshot named like the guest's disk would replace the disk).
  // A JSON string may hold a NUL, where the file system would cut the name short.
  if (path.find('\0') != std::string::npos) throw SnapshotError("the path holds a NUL byte");
  struct stat target {};
  if (::stat(path.c_str(), &target) == 0) {
    if (!S_ISREG(target.st_mode)) throw SnapshotError("'" + path + "' is not a regular file");
    for (const auto& [dev, ino] : input_inodes_) {
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
  ++snapshots_taken_;
  last_snapshot_ms_ = std::chrono::duration<double, std::milli>(t_written - t0).count();
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

void Machine::restore_from(const SnapshotFile& snap) {
  try {
    check_cpuid(snap.meta.section("cpuid").data, vcpus_->cpuid());
    // Every section must be one this machine has, and every device of it must have one.
    const auto devices = stateful_devices();
    for (const SnapshotSection& s : snap.meta.sections) {
      const bool fixed = s.name == "config" || s.name == "cpuid" || s.name == "vm_clock" ||
                         s.name == "kvm";
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

    // Paused before anything loads: the vCPUs park before their first KVM_RUN, the PIT's host
    // timers stay withdrawn, and vm_clock stands at the snapshot's instant, so every deadline a
    // device re-arms from its record means what it meant.
    vcpus_->pause();
    board_->pit().pause();
    loop_->vm_clock.set_paused_at(timers::Nanos{vm_now});
    for (const auto& [name, d] : devices) {
      StateReader in(snap.meta.section(name).data, name);
      d->load_state(in);
    }
    const auto& kvm = snap.meta.section("kvm").data;
    load_vm_state(vm_->vm.fd(), config_.pit == PitMode::kKvm, kvm);
    for (const auto& v : vcpus_->all()) {
      VcpuStateStats vs;
      load_vcpu_state(kvm_caps_, v->fd(), v->index(),
                      snap.meta.section("vcpu" + std::to_string(v->index())).data, &vs);
    }
    paused_kvmclock_ = read_kvm_clock(vm_->vm.fd());
    // KVM's PIT was loaded above, and counts from then on: set again at the resume, it counts
    // from there.
    if (config_.pit == PitMode::kKvm) paused_kvm_pit_ = read_kvm_pit(vm_->vm.fd());
    loop_->dynticks->rearm();
    if (const devices::I8254Pit* pit = board_->pit().pit()) ticks_at_start_ = pit->stats().ticks_injected;
    restored_ = true;
  } catch (const SnapshotError& e) {
    throw VmmError(ExitCode::kBadKernel, "--restore: " + snap.path + ": " + e.what());
  } catch (const devices::StateError& e) {
    throw VmmError(ExitCode::kBadKernel, "--restore: " + snap.path + ": " + e.what());
  }
}

}  // namespace minivmm::vmm
