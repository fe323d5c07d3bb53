// A periodic IRQ handed to the host kernel (--pit-tick kernel). The schedule is split over
// `depth` periodic timerfds: slot s fires at first + (s + k * depth) * period, so together they
// fire once per period, on the vm_clock grid, with no re-arming. Each is watched by a Linux AIO
// poll (IOCB_CMD_POLL) that signals an eventfd when it completes (IOCB_FLAG_RESFD); the eventfd
// is bound to the GSI as a KVM irqfd. When a timerfd expires, the poll completes from the
// kernel's timer interrupt, the eventfd wakes KVM's irqfd and KVM injects the edge — the path
// KVM's own in-kernel PIT takes (hrtimer, kernel worker, vCPU), with no thread of this process
// waking for the tick.
//
// A completed poll is one-shot and its timerfd stays readable until read, so the loop thread
// refills once every depth/2 periods, in one io_submit: per fired slot an IOCB_CMD_PREAD that
// reads (clears) the timerfd — it runs inside io_submit — followed by a new poll. Per refill:
// one io_getevents, one io_submit; per edge: no syscall at all. The expiration count each read
// returns says how many edges a slot saw; more than one means the refill came later than a whole
// round and the extra edges found no poll armed: counted as missed. Kernels before 6.10 cannot
// AIO-read a timerfd (no ->read_iter); there the refill clears each fired slot with read(2),
// one syscall per edge but still one wakeup per half round (probed once, at the first program).
//
// Why a fresh eventfd (a "generation") per start(): an AIO poll in flight cannot be withdrawn
// without completing it, and a completion signals the eventfd, a spurious edge. So stop() first
// unbinds the eventfd from the GSI (KVM_IRQFD deassign waits until it is detached), then
// cancels the polls (io_cancel; their completions reach nobody and are reaped and ignored by
// generation) and disarms and closes the timerfds. The AIO context lives as long as the train:
// io_destroy waits for an RCU grace period (~40 ms here), too long for a guest reprogramming.
//
// What it cannot see: edges that reach KVM's irqfd too close together (its kernel worker held
// off for a whole period by a busy host) merge into one interrupt, and so do edges the guest
// leaves unacknowledged (its vCPU not run by the host). The PIT finds those from the guest's
// acknowledgement count (KVM's irqfd resampler, read on the refill's wakeup through the turn
// hook) and redelivers them itself under the delay policy, as KVM's PIT does in its reinject
// mode; see devices/pc/i8254/ack_audit.h and tick_delivery.h.
//
// Threads: start()/stop() from the device (a vCPU thread, under the PIT's lock); the refill on
// the loop thread (a vm_clock timer, so it stops with the VM); suspend()/resume() on the loop
// thread around a pause; delivered()/stats()/report() from any thread. mu_ is taken after the device's
// lock and before the timer list's; the turn hook is called after mu_ is released.
#pragma once

#include <linux/aio_abi.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "devices/pc/i8254/pulse_train.h"
#include "timers/timer.h"
#include "timers/timer_list.h"

namespace minivmm::vmm {

class HostKernelPulseTrain final : public devices::PulseTrain {
 public:
  // How a generation's eventfd reaches the interrupt line (KVM irqfd assign / deassign).
  // attach() may throw; detach() must not fail. failed() is told when a refill or a resume
  // cannot arm the edges (the guest would silently stop ticking), with mu_ held.
  struct Binding {
    std::function<void(int eventfd)> attach;
    std::function<void(int eventfd)> detach;
    std::function<void(const std::string& why)> failed;
  };

  struct Stats {
    std::uint64_t delivered = 0;    // edges whose poll completed (the eventfd was signalled)
    std::uint64_t generations = 0;  // start()s and resumes that set up a fresh schedule
    std::uint64_t refills = 0;
    std::uint64_t polls_submitted = 0;
    std::uint64_t missed = 0;       // edges that fired with no poll armed (a late refill, or a
                                    // late poll completion): the PIT owes them (missed())
    std::uint64_t failures = 0;     // host refusals; the train stopped and start() said false
    std::uint64_t holds = 0;        // the device gave up on the train (its edges came late)
    std::uint64_t releases = 0;     // start()s that re-armed a held generation (no unbinding)
  };

  // `vm_timers` is the loop's vm_clock list (its clock gives the edges' times). At most
  // `max_depth` slots (timerfds); fewer when a round would last longer than kLookahead.
  // `aio_reads` false forces the read(2) clearing that kernels before 6.10 need (for tests).
  HostKernelPulseTrain(timers::TimerList& vm_timers, Binding binding, std::size_t max_depth = 64,
                   bool aio_reads = true);
  ~HostKernelPulseTrain() override;
  HostKernelPulseTrain(const HostKernelPulseTrain&) = delete;
  HostKernelPulseTrain& operator=(const HostKernelPulseTrain&) = delete;

  bool start(timers::Nanos first, timers::Nanos period) noexcept override;
  void stop() noexcept override;
  void hold() noexcept override;
  std::uint64_t delivered() noexcept override;
  std::uint64_t missed() noexcept override;
  void set_turn_hook(TurnHook hook) noexcept override;
  // stats() without its reap: the counts as of the last refill or delivered() (the PIT's report
  // asks delivered() just before it writes this), so that a report changes nothing.
  void report(devices::ReportWriter& out) const override;

  // vm_clock is about to stop / has started again: withdraw the armed edges / re-arm from the
  // first edge after now (the grid is in vm time, so a pause shifts it as a whole).
  void suspend() noexcept;
  void resume() noexcept;

  Stats stats() noexcept;

  // How long one round of the slots lasts at most: bounds the timerfds a slow rate needs.
  static constexpr timers::Nanos kLookahead{256'000'000};

 private:
  struct Generation {
    std::uint32_t id = 0;  // in the high half of each request's aio_data
    int eventfd = -1;
    bool attached = false;
    std::vector<int> timerfds;
    std::vector<iocb> polls;
    std::vector<iocb> reads;
    std::vector<std::uint64_t> counts;  // the reads' buffers: expirations since the last read
    std::vector<bool> in_flight;        // a poll submitted and not yet reaped
    std::vector<bool> fired;            // its timerfd must be read before the next poll
  };

  // Arms slot s's timerfd for first_edge + s * period, repeating every depth periods.
  bool open_generation_locked(timers::Nanos first_edge);
  bool arm_slots_locked(timers::Nanos first_edge);
  void close_generation_locked();
  // No refill and no armed edge: the refill timer cancelled, the generation closed.
  void withdraw_locked();
  // Whether this kernel can AIO-read a timerfd (->read_iter, Linux 6.10+).
  bool probe_aio_timerfd_read();
  // A host refusal: counts it, tears the schedule down; returns the message (errno's reason).
  std::string give_up_locked(const char* what);
  void reap_locked();
  bool refill_locked(timers::Nanos now);  // `now`: vm_clock time
  void on_refill(const timers::Timer::Expiry& expiry);

  const timers::Clock& clock_;
  const Binding binding_;
  const std::size_t max_depth_;
  const bool allow_aio_reads_;

  mutable std::mutex mu_;  // guards everything below
  bool running_ = false;    // start()ed and not stop()ped
  bool suspended_ = false;  // vm_clock paused: nothing armed
  bool held_ = false;       // hold(): the generation is kept, bound, its timers disarmed
  timers::Nanos first_{0};
  timers::Nanos period_{0};
  std::size_t depth_ = 0;   // this schedule's number of slots
  aio_context_t aio_ = 0;   // created with the first generation, destroyed with the train
  bool aio_reads_ = false;  // fired timerfds are cleared by AIO reads in the refill's io_submit
                            // (one syscall per refill); else by read(2) (one per edge)
  std::uint32_t next_generation_ = 1;
  Generation gen_;
  std::vector<iocb*> batch_;  // refill_locked()'s scratch, kept: no allocation per refill
  TurnHook turn_hook_;        // called after each refill, outside mu_
  Stats stats_;

  timers::Timer refill_timer_;  // last member: cancelled before the state it uses goes away
};

}  // namespace minivmm::vmm
