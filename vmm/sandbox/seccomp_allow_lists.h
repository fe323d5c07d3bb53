// Each thread kind's seccomp allow-list: what the thread calls once it has finished its set-up,
// until it exits (teardown included). Found by reading the code and checked with `strace -f`
// and `--seccomp log` in every mode (docs/reliability.md says how to redo that); a syscall
// that only some options make is allowed only with those options.
//
// Threads: pure functions; call from anywhere.
#pragma once

#include <vector>

#include "vmm/sandbox/seccomp_mode.h"
#include "vmm/sandbox/syscall_allow_list.h"

namespace minivmm::vmm {

// What decides the lists, from the Config and the VM.
struct SeccompFacts {
  int vm_fd = -1;
  bool pit_tick_vcpu = false;    // --pit-tick vcpu: vCPU 0 runs the PIT's timers itself
  bool pit_tick_host_kernel = false;  // --pit-tick kernel: the pulse train (AIO polls on timerfds)
  bool alarm_posix_timer = false;  // --alarm dynticks: timer_settime + signalfd
  bool alarm_timerfd = false;      // --alarm timerfd / periodic
  bool poll_ppoll = false;         // --poll ppoll or auto
  bool poll_epoll = false;         // --poll epoll, timerfd-epoll or auto
  bool poll_timerfd = false;       // --poll timerfd-epoll or auto: the wait's timeout in a timerfd
  bool control_socket = false;     // --api-socket (and with it snapshots)
  std::vector<int> vcpu_fds;       // a snapshot reads each vCPU's state from the loop thread
  bool blk_uring = false;          // a virtio-blk disk on io_uring (set when one was created)
  bool net_tap = false;            // --net tap=, tap-fd=: a TAP descriptor on the loop
  bool net_user = false;           // --net user: libslirp's sockets on the loop
  bool restored = false;
  bool reset_on_exit = false;      // --reset-on-exit: the loop resets the guest without a socket           // --restore: guest RAM is the snapshot file, mapped
  // A sanitizer runtime shares every thread (MINIVMM_SANITIZER_RUNTIME): its own syscalls.
  bool sanitizer_runtime = false;
};

// The main thread from the start of its event loop: timers, fds, interrupts through the VM fd,
// the control socket, and the teardown (joins, closes, unmaps, the stats file, exit).
SyscallAllowList loop_allow_list(const SeccompFacts& facts);
// One vCPU thread from its first KVM_RUN: KVM_RUN and the failure report's register reads on
// its own fd only, interrupts through the VM fd, device work (console output, eventfd wakes).
SyscallAllowList vcpu_allow_list(const SeccompFacts& facts, int vcpu_fd);
// StopSignals' thread: sigwaitinfo, then stopping the run (kicks, a loop wake) or job control.
SyscallAllowList signals_allow_list(const SeccompFacts& facts);
// A virtio-blk worker: vectored I/O on its image, flushes, holes, and the completion interrupt.
SyscallAllowList blk_worker_allow_list(const SeccompFacts& facts);
// A virtio-9p share's server thread (docs/9p.md): walks and opens beneath its share (openat2,
// and the /proc/self/fd reopen of lopen), metadata and directory changes by descriptor, I/O
// on the fids' descriptors, OFD locks, and the completion interrupt.
SyscallAllowList ninep_worker_allow_list(const SeccompFacts& facts);

}  // namespace minivmm::vmm
