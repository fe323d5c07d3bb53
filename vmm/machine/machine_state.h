// The Machine's state beside its parts (issue 34: the machine back to a handful of members),
// grouped by what it is for. Plain data: Machine (machine.cc, machine_snapshot.cc,
// machine_report.cc) keeps the rules; these say what belongs together and why.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <linux/kvm.h>

#include "timers/timer.h"
#include "vmm/control/control_socket.h"
#include "vmm/machine/net_backends.h"
#include "vmm/snapshot/kvm_state.h"
#include "vmm/snapshot/snapshot_file.h"

namespace minivmm::vmm {

// What the host offers the guest from outside its devices: the control socket (bound before
// KVM is opened; serves only in run()) and the network back-ends (opened before KVM; they
// outlive their devices).
struct HostEnds {
  std::unique_ptr<ControlSocket> control;
  std::unique_ptr<NetBackends> nets;
};

// Snapshots, restores, resets and their rounds: everything a snapshot of this run, or the
// snapshot it was restored from, needs to know, and the figures the report gives of them.
struct SnapshotSession {
  // What KVM's vCPU records need (asked before the sandbox); the drives' sizes and the files
  // they opened, resolved.
  KvmStateCaps kvm_caps;
  std::vector<std::uint64_t> drive_sizes;
  std::vector<std::string> drive_paths;
  // The run's input files (kernel, initrd, drives) by device and inode: a snapshot is never
  // renamed onto one of them.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> input_inodes;
  std::uint64_t snapshots_taken = 0;
  double last_snapshot_ms = -1;  // the last snapshot's pause to written; -1 before one

  // --restore: whether run() resumes a restored guest, and the file it came from. Its RAM is
  // that file, mapped: if the file is cut short while the guest runs, the run's end says so
  // (exit 18), whatever the guest did without its memory.
  bool restored = false;
  const SnapshotFile* from = nullptr;
  std::string backing_gone_message;  // the SIGBUS handler's line (crash_signals.h)
  std::int64_t vm_now = 0;       // the snapshot's vm_clock instant: where a reset goes
  std::uint64_t facs_addr = 0;   // the restored guest's FACS (the "firmware" section)
  std::uint64_t ticks_at_start = 0;  // the restored guest's ticks before this run (the rate's base)
  // A restore's cost: from the constructor's first step to the resume in run() (-1: booted),
  // and each set-up step's time, then run()'s start-up (snapshot.restore_phases).
  std::chrono::steady_clock::time_point constructed_at = std::chrono::steady_clock::now();
  double restore_ms = -1;
  // The resume's instant on CLOCK_MONOTONIC (steady_clock's clock on Linux), in ns (-1:
  // booted): a caller that read the same clock before it started the process gets the time
  // from process start to a running guest, which restore_ms (from the first set-up step) leaves
  // out (scripts/bench_snapshot.py, issue 35).
  std::int64_t resumed_monotonic_ns = -1;
  std::vector<std::pair<std::string, double>> phases;

  // Resets in place ({"cmd":"reset"} and --reset-on-exit).
  std::uint64_t resets = 0;
  std::uint64_t reset_pages_dropped = 0;
  double last_reset_ms = -1;
  // --reset-on-exit: each round's status (the guest's end: debug-exit's status, ...), how many
  // resets it made, and whether one is on its way to the loop. Under rounds_mu (the vCPU that
  // saw the guest end, and the loop).
  mutable std::mutex rounds_mu;
  std::vector<int> round_statuses;
  std::uint64_t resets_on_exit = 0;
  bool reset_pending = false;
};

// What holds the guest's vCPUs and clocks still: a pause (kvmclock as it read, set back at the
// resume so that it does not count the pause; each device holds its own, PausableDevice) and
// ACPI S3.
struct GuestHold {
  std::uint64_t kvmclock = 0;
  // S3: the vCPUs hold (set by the guest's SLP_EN, cleared once they are parked); asleep until
  // a wake; the rt_clock timer of the RTC alarm that wakes it.
  std::atomic<bool> suspend{false};
  bool asleep = false;
  std::unique_ptr<timers::Timer> rtc_wake;
  // Config::dump_vcpus_on_duration, set as --duration expires: each vCPU logs its registers as
  // it stops.
  std::atomic<bool> dump_vcpus{false};
};

}  // namespace minivmm::vmm
