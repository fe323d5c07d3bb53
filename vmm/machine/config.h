// Everything `minivmm run` was asked to do, parsed and validated by vmm/cli/run_config.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "devices/pc/i8254/lost_tick_policy.h"
#include "loop/poller.h"
#include "timers/alarm_timer.h"
#include "vmm/host/cpu_affinity.h"
#include "vmm/vcpu/cpuid_policy.h"
#include "vmm/machine/drive_spec.h"
#include "vmm/machine/net_spec.h"
#include "vmm/machine/share_spec.h"
#include "vmm/sandbox/seccomp_mode.h"

namespace minivmm::vmm {

enum class PitMode { kUser, kKvm };

// Who delivers the user-space PIT's periodic ticks: the loop thread (an alarm backend wakes it,
// it raises IRQ0, the vCPU wakes for the interrupt), the vCPU thread itself (a POSIX timer
// signal interrupts KVM_RUN: one thread wakeup per tick instead of two), or the host kernel
// (the next edges armed ahead on timerfds whose AIO polls signal an irqfd: no thread of ours
// wakes per tick). On the command line: loop, vcpu, kernel.
enum class PitTick { kLoop, kVcpu, kHostKernel };

struct Config {
  std::string kernel_path;
  std::string initrd_path;
  std::string cmdline;
  std::uint64_t memory_bytes = 64ull << 20;
  std::uint32_t cpus = 1;  // vCPUs, 1..kMaxVcpus; vCPU 0 boots, the others wait for SIPI
  PitMode pit = PitMode::kUser;
  PitTick pit_tick = PitTick::kHostKernel;
  std::optional<double> duration_s;  // stop after this long (rt_clock)
  std::string stats_path;            // "" none, "-" stdout
  bool quiet_summary = false;
  // The measured best (docs/profiling.md): no host timer, the deadline is epoll_pwait2's
  // nanosecond timeout — 2 syscalls per idle guest tick, and flat in the number of fds.
  timers::AlarmKind alarm = timers::AlarmKind::kPpoll;
  loop::PollerKind poller = loop::PollerKind::kEpoll;
  std::int64_t min_delta_ns = 20'000;
  std::optional<std::int64_t> timer_slack_ns;
  std::int64_t periodic_alarm_hz = 1000;
  devices::LostTickPolicy lost_ticks = devices::LostTickPolicy::kDelay;
  CpuModel cpu = CpuModel::kBaseline;
  std::vector<std::string> cpuid_mask;
  std::string api_socket;
  // --gdb ADDR (vmm/gdb/gdb_stub.h): the gdb stub's address, `tcp:[HOST]:PORT` or `unix:PATH`
  // (empty: none); --gdb-wait stops the guest before its first instruction; --gdb-on-fault
  // holds a panicked or triple-faulted guest for the debugger instead of ending the run.
  std::string gdb;
  bool gdb_wait = false;
  bool gdb_on_fault = false;
  // --mailbox GPA,SIZE (with --restore): guest-physical bytes a reset leaves as they are, and
  // that {"cmd":"mailbox"} reads and writes: a harness passes the next input through them.
  std::uint64_t mailbox_gpa = 0;
  std::uint64_t mailbox_bytes = 0;
  // --reset-on-exit N (with --restore): the guest's first N ends of its run (isa-debug-exit, an
  // i8042 reset, an S5 power-off, a pvpanic) each reset it to its snapshot instead of ending
  // the run; the one after ends it. Rounds of one test from one booted state.
  std::uint64_t reset_rounds = 0;
  // How PIT ticks reach KVM; nullopt: the measured best for the thread that delivers them
  // (loop: an irqfd write; vCPU: KVM_IRQ_LINE, which injects at once instead of through a
  // kernel worker the halted vCPU would have to block for).
  std::optional<bool> irq_inject_ioctl;
  CpuAffinity cpu_affinity;   // --cpu-affinity; empty lists: the scheduler decides
  bool console_input = true;  // forward stdin to COM1
  bool interactive = false;   // raw terminal; Ctrl-A x quits
  // virtio-mmio devices (docs/virtio.md): --drive (virtio-blk, one per flag) and --console.
  std::vector<DriveSpec> drives;
  bool virtio_console = false;  // --console virtio: the guest console is virtio-console
  // minivmm exec (vmm/exec/): output-only virtio-consoles after the console, each writing to
  // its host fd (the command's stdout and stderr), and every virtio-mmio window announced in
  // the ACPI DSDT (LNRO0005) instead of on the command line: Debian's kernels are built without
  // CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES. kernel_console_fd: where COM1's output goes (-1: stdout).
  std::vector<int> output_console_fds;
  bool virtio_in_acpi = false;
  int kernel_console_fd = -1;
  // What --duration's expiry ends the run with (exec's timeout has its own code).
  int duration_status = 0;
  bool dump_vcpus_on_duration = false;  // and each vCPU logs its registers as it stops
  // --net: a virtio-net device each (docs/network.md), after the console and the disks.
  std::vector<NetSpec> nets;
  // --share (virtio-9p, docs/9p.md): a 9p device each, after the NICs, tags share0, share1...
  std::vector<ShareSpec> shares;

  // The virtio-mmio devices in board order: the console, the output consoles, the disks, the
  // NICs, the shares.
  std::size_t virtio_devices() const noexcept {
    return (virtio_console ? 1 : 0) + output_console_fds.size() + drives.size() + nets.size() +
           shares.size();
  }
  // --testdev: QEMU's fw_cfg and pc-testdev (kvm-unit-tests' devices), its ports and its 24
  // IRQ lines; off, a guest cannot drive arbitrary GSIs.
  bool testdev = false;
  // Per-thread syscall allow-lists (docs/reliability.md). seccomp_selftest: the hidden
  // --seccomp-selftest, the thread kind that makes a forbidden syscall once filtered.
  SeccompMode seccomp = SeccompMode::kOn;
  std::optional<ThreadKind> seccomp_selftest;
};

}  // namespace minivmm::vmm
