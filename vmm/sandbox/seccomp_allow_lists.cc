#include "vmm/sandbox/seccomp_allow_lists.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vmm/kvm/guest_ram_mapping.h"
#include "vmm/kvm/kvm.h"

namespace minivmm::vmm {
namespace {

// Every thread: memory (malloc, std::vector, spdlog), locks and joins, clocks (vDSO, with a
// syscall fallback on hosts whose clocksource has no vDSO path), logging to stderr, signal
// returns (the vCPU kick and timer signals, the SIGSYS report), and thread or process exit
// (glibc returns a finished thread's stack with madvise). And what a signal that ends the
// process (a crash, a kill -USR1) needs on whichever thread it lands, to end it as itself
// rather than as a seccomp violation: abort() and crash_signals.h's handler put the previous
// disposition back (rt_sigaction) and raise the signal again (getpid, gettid, tgkill); the
// handler's terminal ioctls are in every filter (SeccompSandbox::enter).
SyscallAllowList common_list(const SeccompFacts& facts) {
  SyscallAllowList l;
  l.allow({SYS_mmap, SYS_munmap, SYS_mremap, SYS_madvise, SYS_brk, SYS_mprotect});
  l.allow({SYS_futex, SYS_write, SYS_clock_gettime, SYS_rt_sigprocmask, SYS_rt_sigreturn,
           SYS_restart_syscall, SYS_exit, SYS_exit_group, SYS_getpid, SYS_gettid});
  l.allow({SYS_rt_sigaction, SYS_tgkill});
  if (facts.sanitizer_runtime) {
    // ASan/UBSan/TSan share every thread with us; none of this runs in a normal build. Seen
    // (strace -f, --seccomp log) on this project's runs: sigaltstack, pipe2, sched_yield,
    // clone, prctl, getdents; the rest is what the same paths of the runtimes call.
    // Allocators, shadow memory, per-thread alternate signal stacks, interceptors that probe
    // memory through a pipe or wait for one another.
    l.allow({SYS_sigaltstack, SYS_mincore, SYS_getrlimit, SYS_prlimit64, SYS_sched_getaffinity,
             SYS_sysinfo, SYS_uname, SYS_pipe2, SYS_sched_yield, SYS_nanosleep,
             SYS_clock_nanosleep, SYS_set_robust_list, SYS_rseq, SYS_getrusage});
    // LeakSanitizer at exit, on the main thread: a tracer clone that inherits the loop's
    // filter, checks its parent, lists /proc/self/task, ptrace-attaches every thread and reads
    // their registers and memory.
    l.allow({SYS_clone, SYS_prctl, SYS_getppid, SYS_ptrace, SYS_wait4, SYS_process_vm_readv,
             SYS_kill, SYS_open, SYS_openat, SYS_close, SYS_read, SYS_pread64, SYS_getdents,
             SYS_getdents64, SYS_lseek, SYS_fstat, SYS_newfstatat, SYS_readlink,
             SYS_readlinkat});
    // A report reads /proc/self/maps (above), looks for a symbolizer on the PATH (stat) and
    // starts it.
    l.allow({SYS_stat, SYS_dup2, SYS_execve, SYS_fork, SYS_vfork});
    // And asks whether stderr is a terminal, for its colours (isatty). Both seen when a crash
    // signal that crash_signals.h chains to the sanitizer's handler was reported: under ASan the
    // stat ended the run with exit code 14 instead of the report's; TSan's handler blocks
    // SIGSYS, so there the ioctl's trap killed the process by SIGSYS.
    l.allow_ioctl(STDERR_FILENO, TCGETS);
  }
  return l;
}

// KVM's interrupt ioctls on the VM fd, which every thread that runs device code may make: the
// level of a line (KVM_IRQ_LINE_STATUS; Vm::irq_line).
void allow_irq_line(SyscallAllowList& l, const SeccompFacts& facts) {
  l.allow_ioctl(facts.vm_fd, KVM_IRQ_LINE_STATUS);
}

// --pit-tick kernel: HostKernelPulseTrain opens a generation (eventfd, irqfd, timerfds armed on
// the grid, AIO polls) when the guest programs the PIT (vCPU) or on resume (loop), refills on
// the loop, and closes one on reprogramming, pause and teardown.
void allow_pulse_train(SyscallAllowList& l, const SeccompFacts& facts) {
  if (!facts.pit_tick_host_kernel) return;
  l.allow({SYS_eventfd2, SYS_timerfd_create, SYS_timerfd_settime, SYS_io_setup, SYS_io_submit,
           SYS_io_getevents, SYS_io_cancel, SYS_read, SYS_close});
  l.allow_ioctl(facts.vm_fd, KVM_IRQFD);
}

// --net (docs/network.md, "Seccomp"): the loop moves every frame. A TAP is read, and written
// with a zeroed virtio-net header in front of each frame (writev). libslirp runs inside the
// loop's calls into it and makes the host side of each guest flow: sockets of its own (TCP and
// UDP; a raw ICMP socket as its ping fallback), their options and addresses, the data, and
// /etc/resolv.conf at the guest's first DNS query (openat, newfstatat and read, in the loop's
// list already).
void allow_network(SyscallAllowList& l, const SeccompFacts& facts) {
  if (facts.net_tap) l.allow(SYS_writev);
  if (!facts.net_user) return;
  l.allow({SYS_socket, SYS_connect, SYS_bind, SYS_listen, SYS_accept, SYS_accept4,
           SYS_getsockname, SYS_getpeername, SYS_getsockopt, SYS_setsockopt, SYS_shutdown,
           SYS_sendto, SYS_recvfrom, SYS_recvmsg, SYS_sendmsg});
  l.allow_ioctl(SyscallAllowList::kAnyFd, FIONREAD);
  l.allow_fcntl(F_GETFL);
  l.allow_fcntl(F_SETFL);
}

// {"cmd":"snapshot"} (vmm/machine/machine_snapshot.cc), on the loop thread with the vCPUs
// parked: each vCPU's registers, FPU, MSRs, LAPIC and events, the irqchip and KVM's PIT read
// (kvmclock is above), and the file written beside its name (openat, rename: the loop's list
// already has them), sized with a hole for every page never written.
void allow_snapshot(SyscallAllowList& l, const SeccompFacts& facts) {
  for (const int fd : facts.vcpu_fds) {
    for (const unsigned long req :
         {KVM_GET_MP_STATE, KVM_GET_REGS, KVM_GET_SREGS, kKvmGetXsave, kKvmGetXsave2,
          KVM_GET_FPU, KVM_GET_XCRS, KVM_GET_DEBUGREGS, KVM_GET_LAPIC, KVM_GET_VCPU_EVENTS,
          kKvmGetMsrs}) {
      l.allow_ioctl(fd, req);
    }
  }
  l.allow_ioctl(facts.vm_fd, KVM_GET_IRQCHIP);
  // KVM's PIT (--pit kvm) is read at a pause (set back at the resume: above).
  l.allow_ioctl(facts.vm_fd, KVM_GET_PIT2);
  l.allow({SYS_ftruncate, SYS_pwrite64});
}

// ACPI S3 (Machine::enter_s3 and wake, docs/acpi-pm.md), on the loop thread, with or without a
// control socket: the pause reads each vCPU's kvmclock MSR; the wake, with the vCPUs parked,
// sets the boot vCPU's registers to the real-mode waking vector and the others to wait-for-SIPI.
void allow_s3_wake(SyscallAllowList& l, const SeccompFacts& facts) {
  for (const int fd : facts.vcpu_fds) {
    for (const unsigned long req :
         {KVM_GET_SREGS, KVM_SET_SREGS, KVM_SET_REGS, KVM_SET_MP_STATE, kKvmGetMsrs}) {
      l.allow_ioctl(fd, req);
    }
  }
}

// {"cmd":"reset"} of a restored guest (Machine::reset), on the loop thread with the vCPUs
// parked: which pages were written, from /proc/self/pagemap (its PAGEMAP_SCAN ioctl on the
// descriptor the restore opened, or preads of it where the host lacks the ioctl), those dropped
// (madvise: the common list), then every vCPU's and the VM's records loaded again as at the
// restore.
void allow_reset(SyscallAllowList& l, const SeccompFacts& facts) {
  l.allow(SYS_pread64);
  if (facts.pagemap_fd >= 0) l.allow_ioctl(facts.pagemap_fd, GuestRamMapping::pagemap_scan_request());
  for (const int fd : facts.vcpu_fds) {
    for (const unsigned long req :
         {KVM_SET_MP_STATE, KVM_SET_REGS, KVM_SET_SREGS, kKvmSetXsave, KVM_SET_FPU, KVM_SET_XCRS,
          KVM_SET_DEBUGREGS, KVM_SET_LAPIC, KVM_SET_VCPU_EVENTS, kKvmSetMsrs, KVM_SET_MSRS}) {
      l.allow_ioctl(fd, req);
    }
  }
  l.allow_ioctl(facts.vm_fd, KVM_SET_IRQCHIP);
  // The pause before it reads KVM's PIT (--pit kvm) as a snapshot's does; with
  // --reset-on-exit there may be no control socket to have allowed that.
  l.allow_ioctl(facts.vm_fd, KVM_GET_PIT2);
}

// --gdb (vmm/gdb/gdb_stub.h), on the loop thread with the vCPUs parked: one client accepted
// (a second accepted and closed), its bytes read and written, TCP_NODELAY; each vCPU's
// registers, FPU, linear-address translation, guest debugging (breakpoints, DR7, single-step)
// and the kvmclock stop notice.
void allow_gdb(SyscallAllowList& l, const SeccompFacts& facts) {
  if (!facts.gdb) return;
  l.allow({SYS_accept4, SYS_sendto, SYS_recvfrom, SYS_setsockopt, SYS_unlink});
  for (const int fd : facts.vcpu_fds) {
    for (const unsigned long req :
         {KVM_GET_REGS, KVM_SET_REGS, KVM_GET_SREGS, KVM_SET_SREGS, KVM_GET_FPU, KVM_SET_FPU,
          KVM_TRANSLATE, KVM_SET_GUEST_DEBUG, static_cast<unsigned long>(KVM_KVMCLOCK_CTRL)}) {
      l.allow_ioctl(fd, req);
    }
  }
}

}  // namespace

SyscallAllowList loop_allow_list(const SeccompFacts& facts) {
  SyscallAllowList l = common_list(facts);
  // fds: console input and eventfds (read), wakes and output (write), and
  // /proc/self/task/N/status for the per-thread context switches (openat, fstat, read, close).
  l.allow({SYS_read, SYS_close, SYS_openat, SYS_fstat, SYS_newfstatat, SYS_lseek, SYS_getrusage});
  // The --stats report at the end (vmm/host/output_file.h): a regular file is written beside its
  // target (openat) and renamed onto it, the temporary removed if that fails; a FIFO or a
  // terminal that takes nothing for a while is waited for, bounded (poll).
  l.allow({SYS_rename, SYS_renameat, SYS_renameat2, SYS_unlink, SYS_unlinkat, SYS_poll});
  // The report: how much of guest RAM the host backed (GuestRamMapping::resident_bytes).
  l.allow(SYS_mincore);
  // Kicking vCPUs out of KVM_RUN (pthread_kill: tgkill).
  l.allow(SYS_tgkill);
  // The drives' locks given up at the end of the run (Machine::release_drives): LOCK_UN only.
  l.allow_flock(LOCK_UN);
  allow_s3_wake(l, facts);
  if (facts.poll_ppoll) l.allow(SYS_ppoll);
  if (facts.poll_epoll) l.allow({SYS_epoll_wait, SYS_epoll_pwait, SYS_epoll_pwait2, SYS_epoll_ctl});
  if (facts.poll_timerfd) l.allow(SYS_timerfd_settime);
  if (facts.alarm_timerfd) l.allow(SYS_timerfd_settime);
  // dynticks: a POSIX timer (disarmed and deleted at exit) whose signal arrives on a signalfd.
  if (facts.alarm_posix_timer) l.allow({SYS_timer_settime, SYS_timer_delete});
  if (facts.pit_tick_vcpu) l.allow(SYS_timer_delete);  // the vCPU's ThreadTimers, at teardown
  if (facts.control_socket) {
    // Clients come and go; the EMFILE reserve fd is /dev/null, reopened (openat above); the
    // socket file is removed at exit.
    // A client must be our own user (SO_PEERCRED against geteuid); its fd is made
    // non-blocking (fcntl F_GETFL, F_SETFL).
    l.allow({SYS_accept4, SYS_sendto, SYS_recvfrom, SYS_shutdown, SYS_unlink, SYS_getsockopt,
             SYS_geteuid});
    l.allow_fcntl(F_GETFL);
    l.allow_fcntl(F_SETFL);
    allow_snapshot(l, facts);
  }
  if (facts.restored && (facts.control_socket || facts.reset_on_exit)) allow_reset(l, facts);
  // A pause stops kvmclock with vm_clock (read as the vCPUs park, set back on resume), and a
  // restored guest is resumed so once the loop runs.
  l.allow_ioctl(facts.vm_fd, KVM_GET_CLOCK);
  l.allow_ioctl(facts.vm_fd, KVM_SET_CLOCK);
  l.allow_ioctl(facts.vm_fd, KVM_SET_PIT2);  // --pit kvm: its state set back at the resume
  allow_irq_line(l, facts);
  allow_pulse_train(l, facts);
  if (facts.pit_tick_host_kernel) l.allow(SYS_io_destroy);  // the train's AIO context, at teardown
  // virtio-blk on io_uring: requests submitted after an ioeventfd notification, and the wait
  // for those still on the ring at reset or teardown. The ring was set up (io_uring_setup,
  // io_uring_register) before any filter, and refuses io_uring_register once enabled.
  if (facts.blk_uring) l.allow(SYS_io_uring_enter);
  // Teardown: irqfds and ioeventfds unbound as their owners go.
  l.allow_ioctl(facts.vm_fd, KVM_IRQFD);
  l.allow_ioctl(facts.vm_fd, KVM_IOEVENTFD);
  allow_network(l, facts);
  allow_gdb(l, facts);
  // The terminal given back (ConsoleInput::restore_terminal; reading it: isatty).
  l.allow_ioctl(STDIN_FILENO, TCGETS);
  l.allow_ioctl(STDIN_FILENO, TCSETS);
  return l;
}

SyscallAllowList vcpu_allow_list(const SeccompFacts& facts, int vcpu_fd) {
  SyscallAllowList l = common_list(facts);
  l.allow_ioctl(vcpu_fd, KVM_RUN);
  // log_crash_report (vcpu/vcpu_crash_report.h), before a triple fault or an emulation failure ends the run.
  l.allow_ioctl(vcpu_fd, KVM_GET_REGS);
  l.allow_ioctl(vcpu_fd, KVM_GET_SREGS);
  l.allow_ioctl(vcpu_fd, KVM_TRANSLATE);
  allow_irq_line(l, facts);
  allow_pulse_train(l, facts);
  // --gdb: a guest's own int3, taken by the stub's software breakpoints, handed back to it.
  if (facts.gdb) {
    l.allow_ioctl(vcpu_fd, KVM_GET_VCPU_EVENTS);
    l.allow_ioctl(vcpu_fd, KVM_SET_VCPU_EVENTS);
  }
  // Kicking the other vCPUs when this one stops the run; its context switches at exit;
  // pc-testdev's page flush (mprotect, in the common list).
  l.allow({SYS_tgkill, SYS_getrusage});
  // virtio-blk on io_uring: a notify that exits to this thread (no ioeventfd) submits, and a
  // driver's reset waits for the requests still on the ring.
  if (facts.blk_uring) l.allow(SYS_io_uring_enter);
  // A restored guest's fatal exit first asks whether its memory file was cut short (fstat of
  // the snapshot, Vcpu::host_fault_check) before it blames the guest.
  if (facts.restored) l.allow({SYS_fstat, SYS_newfstatat});
  if (facts.pit_tick_vcpu) {
    // ThreadTimers: the POSIX timer re-armed and its signal taken between KVM_RUNs; the PIT's
    // acknowledgement audit, which then runs here, reads IRQ0's resample eventfd.
    l.allow({SYS_timer_settime, SYS_rt_sigtimedwait, SYS_read});
  }
  return l;
}

SyscallAllowList signals_allow_list(const SeccompFacts& facts) {
  SyscallAllowList l = common_list(facts);
  l.allow({SYS_rt_sigtimedwait, SYS_tgkill});
  // SIGTSTP: the terminal back, then SIGSTOP to the process; SIGCONT: raw again if in the
  // foreground (tcgetpgrp, getpgrp).
  l.allow({SYS_kill, SYS_getpgrp});
  l.allow_ioctl(STDIN_FILENO, TIOCGPGRP);
  l.allow_ioctl(STDIN_FILENO, TCSETS);
  l.allow_ioctl(STDIN_FILENO, TCGETS);  // glibc's tcsetattr reads back what it set
  return l;
}

SyscallAllowList blk_worker_allow_list(const SeccompFacts& facts) {
  SyscallAllowList l = common_list(facts);
  l.allow({SYS_preadv, SYS_pwritev, SYS_fdatasync, SYS_fallocate});
  allow_irq_line(l, facts);
  return l;
}

SyscallAllowList ninep_worker_allow_list(const SeccompFacts& facts) {
  SyscallAllowList l = common_list(facts);
  // Walks, reopens and creates; fid duplicates and OFD locks (fcntl); stat by descriptor.
  l.allow({SYS_openat2, SYS_openat, SYS_close, SYS_fstat, SYS_newfstatat, SYS_fstatfs,
           SYS_statfs});
  for (const int cmd : {F_DUPFD_CLOEXEC, F_GETFL, F_SETFL, F_OFD_SETLK, F_OFD_GETLK}) {
    l.allow_fcntl(cmd);
  }
  // I/O and directories.
  l.allow({SYS_pread64, SYS_pwrite64, SYS_getdents64, SYS_lseek, SYS_fsync, SYS_fdatasync});
  // Changes (refused before the call on a read-only share). glibc may use the newer
  // renameat2 and fchmodat2 for the classic calls.
  l.allow({SYS_mkdirat, SYS_symlinkat, SYS_linkat, SYS_unlinkat, SYS_renameat, SYS_renameat2,
           SYS_readlinkat, SYS_fchmodat, SYS_fchownat, SYS_truncate, SYS_ftruncate,
           SYS_utimensat});
#ifdef SYS_fchmodat2
  l.allow(SYS_fchmodat2);
#endif
  allow_irq_line(l, facts);
  return l;
}

}  // namespace minivmm::vmm
