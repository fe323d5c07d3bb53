#include "vmm/kvm/host_kernel_pulse_train.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <exception>

#include "devices/log/log.h"
#include "timers/syscall_counters.h"
#include "timers/timespec.h"

namespace minivmm::vmm {
namespace {

using timers::Nanos;
using timers::Syscall;
using timers::thread_syscalls;
using timers::to_timespec;

// glibc has no wrappers for the kernel's AIO calls (libaio is another package); the ABI is
// linux/aio_abi.h.
long sys_io_setup(unsigned nr, aio_context_t* ctx) { return syscall(SYS_io_setup, nr, ctx); }
long sys_io_destroy(aio_context_t ctx) { return syscall(SYS_io_destroy, ctx); }
long sys_io_cancel(aio_context_t ctx, iocb* cb, io_event* result) {
  return syscall(SYS_io_cancel, ctx, cb, result);
}
long sys_io_submit(aio_context_t ctx, long n, iocb** cbs) {
  return syscall(SYS_io_submit, ctx, n, cbs);
}
long sys_io_getevents(aio_context_t ctx, long min_nr, long nr, io_event* events,
                      timespec* timeout) {
  return syscall(SYS_io_getevents, ctx, min_nr, nr, events, timeout);
}

}  // namespace

HostKernelPulseTrain::HostKernelPulseTrain(timers::TimerList& vm_timers, Binding binding,
                                   std::size_t max_depth, bool aio_reads)
    : clock_(vm_timers.clock()),
      binding_(std::move(binding)),
      max_depth_(std::max<std::size_t>(max_depth, 2)),
      allow_aio_reads_(aio_reads),
      refill_timer_(vm_timers, "pulse-train-refill",
                    [this](const timers::Timer::Expiry& e) { on_refill(e); }) {}

HostKernelPulseTrain::~HostKernelPulseTrain() {
  std::lock_guard lock(mu_);
  withdraw_locked();
  if (aio_ != 0) sys_io_destroy(aio_);
}

bool HostKernelPulseTrain::start(Nanos first, Nanos period) noexcept {
  std::lock_guard lock(mu_);
  if (held_ && gen_.eventfd >= 0 && period == period_ && !suspended_) {
    // Back from a hold on the same schedule: re-arm the generation still bound, so no
    // KVM_IRQFD unbinding waits for the injection worker the hold was for. Its polls still in
    // flight complete at their timers' next edges.
    held_ = false;
    first_ = first;
    if (arm_slots_locked(first) && refill_locked(clock_.now())) {
      running_ = true;
      ++stats_.releases;
      return true;
    }
  }
  held_ = false;
  withdraw_locked();
  running_ = false;
  if (period <= Nanos{0}) return false;
  first_ = first;
  period_ = period;
  depth_ = std::clamp<std::size_t>(static_cast<std::size_t>(kLookahead / period), 2, max_depth_);
  // The refill may ride on another wakeup up to a quarter of a round late.
  refill_timer_.set_slack(period * static_cast<std::int64_t>(depth_ / 4));
  running_ = true;
  if (suspended_) return true;  // armed on resume()
  if (open_generation_locked(first) && refill_locked(clock_.now())) return true;
  log::warn("{}; the PIT's own timer delivers the ticks", give_up_locked("unavailable"));
  return false;
}

void HostKernelPulseTrain::stop() noexcept {
  std::lock_guard lock(mu_);
  running_ = false;
  held_ = false;
  withdraw_locked();
}

void HostKernelPulseTrain::hold() noexcept {
  std::lock_guard lock(mu_);
  if (!running_) return;
  running_ = false;  // no refill, and resume() re-arms nothing
  held_ = true;
  ++stats_.holds;
  refill_timer_.cancel();
  // What the slots whose polls completed saw since their last read (as a refill would): edges
  // beyond the one reported fired with no poll armed. A slot whose poll is still in flight is
  // left alone (reading it would swallow the edge its poll is about to report). Read before the
  // disarming below, which zeroes a timerfd's expiration count: edges that fire between the two
  // (this thread preempted there) are neither delivered nor counted. A hold gives the ticks to
  // the PIT's own timer, which delivers from its vm_clock grid, not from this count.
  reap_locked();
  for (std::size_t slot = 0; slot < gen_.timerfds.size(); ++slot) {
    if (!gen_.fired[slot]) continue;
    std::uint64_t count = 0;
    thread_syscalls().add(Syscall::kRead);
    if (::read(gen_.timerfds[slot], &count, sizeof count) == sizeof count && count > 1) {
      stats_.missed += count - 1;
    }
    gen_.fired[slot] = false;
  }
  // Disarmed, the timers fire no more edges; the polls still armed on them stay in flight and
  // complete only when the generation is closed, after it is unbound (the next start()/stop()).
  const itimerspec off{};
  for (int fd : gen_.timerfds) {
    thread_syscalls().add(Syscall::kTimerfdSettime);
    ::timerfd_settime(fd, 0, &off, nullptr);
  }
}

std::uint64_t HostKernelPulseTrain::delivered() noexcept {
  std::lock_guard lock(mu_);
  reap_locked();
  return stats_.delivered;
}

std::uint64_t HostKernelPulseTrain::missed() noexcept {
  // As of the last reap (the refill's, or delivered()'s): no io_getevents of its own, since the
  // device asks on the refill's turn, right after one.
  std::lock_guard lock(mu_);
  return stats_.missed;
}

void HostKernelPulseTrain::set_turn_hook(TurnHook hook) noexcept {
  std::lock_guard lock(mu_);
  turn_hook_ = std::move(hook);
}

HostKernelPulseTrain::Stats HostKernelPulseTrain::stats() noexcept {
  std::lock_guard lock(mu_);
  reap_locked();
  return stats_;
}

void HostKernelPulseTrain::report(devices::ReportWriter& out) const {
  Stats s;
  {
    std::lock_guard lock(mu_);
    s = stats_;
  }
  out.count("delivered", s.delivered);
  out.count("generations", s.generations);
  out.count("refills", s.refills);
  out.count("polls_submitted", s.polls_submitted);
  out.count("missed", s.missed);
  out.count("failures", s.failures);
  out.count("holds", s.holds);
  out.count("releases", s.releases);
}

void HostKernelPulseTrain::suspend() noexcept {
  std::lock_guard lock(mu_);
  suspended_ = true;
  withdraw_locked();
}

void HostKernelPulseTrain::resume() noexcept {
  std::lock_guard lock(mu_);
  if (!suspended_) return;
  suspended_ = false;
  if (!running_) return;
  // Edges armed before the pause were withdrawn; vm_clock stood still meanwhile, so the next
  // edge of the grid after now is the first one the guest has not had.
  const Nanos now = clock_.now();
  const Nanos next = now < first_ ? first_ : first_ + ((now - first_) / period_ + 1) * period_;
  if (open_generation_locked(next) && refill_locked(now)) return;
  const std::string why = give_up_locked("cannot re-arm after resume");
  if (binding_.failed) binding_.failed(why);
}

bool HostKernelPulseTrain::probe_aio_timerfd_read() {
  // A disarmed non-blocking timerfd: with ->read_iter (Linux 6.10+) the AIO read completes at
  // once with -EAGAIN; without it io_submit refuses the request with EINVAL.
  const int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (fd < 0) return false;
  std::uint64_t count = 0;
  iocb rd{};
  rd.aio_lio_opcode = IOCB_CMD_PREAD;
  rd.aio_fildes = static_cast<std::uint32_t>(fd);
  rd.aio_buf = reinterpret_cast<std::uintptr_t>(&count);
  rd.aio_nbytes = sizeof count;
  rd.aio_data = ~std::uint64_t{0};  // no generation's
  iocb* batch[] = {&rd};
  const bool ok = sys_io_submit(aio_, 1, batch) == 1;
  if (ok) {
    io_event ev{};
    timespec wait{1, 0};
    sys_io_getevents(aio_, 1, 1, &ev, &wait);  // it completed inside io_submit
  }
  ::close(fd);
  if (!ok) log::debug("PIT pulse train: no AIO reads of timerfds here; clearing with read(2)");
  return ok;
}

std::string HostKernelPulseTrain::give_up_locked(const char* what) {
  const int err = errno;  // before the teardown's own syscalls
  ++stats_.failures;
  withdraw_locked();
  running_ = false;
  return std::string("PIT pulse train: ") + what + ": " + std::strerror(err);
}

bool HostKernelPulseTrain::open_generation_locked(Nanos first_edge) {
  Generation g;
  g.eventfd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g.eventfd < 0) return false;
  gen_ = std::move(g);
  try {
    binding_.attach(gen_.eventfd);
  } catch (const std::exception& e) {
    log::error("PIT pulse train: {}", e.what());
    return false;
  }
  gen_.attached = true;
  // Room for a round's completions (a read and a poll per slot) plus the cancelled polls of a
  // few earlier generations.
  if (aio_ == 0) {
    if (sys_io_setup(static_cast<unsigned>(4 * max_depth_), &aio_) < 0) {
      aio_ = 0;
      return false;
    }
    aio_reads_ = allow_aio_reads_ && probe_aio_timerfd_read();
  }
  gen_.id = next_generation_++;
  gen_.polls.assign(depth_, iocb{});
  gen_.reads.assign(depth_, iocb{});
  gen_.counts.assign(depth_, 0);
  gen_.in_flight.assign(depth_, false);
  gen_.fired.assign(depth_, false);
  for (std::size_t slot = 0; slot < depth_; ++slot) {
    const int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (fd < 0) return false;
    gen_.timerfds.push_back(fd);
  }
  if (!arm_slots_locked(first_edge)) return false;
  ++stats_.generations;
  return true;
}

bool HostKernelPulseTrain::arm_slots_locked(Nanos first_edge) {
  const Nanos round = period_ * static_cast<std::int64_t>(depth_);
  for (std::size_t slot = 0; slot < gen_.timerfds.size(); ++slot) {
    const int fd = gen_.timerfds[slot];
    const auto host = clock_.to_monotonic(first_edge + period_ * static_cast<std::int64_t>(slot));
    if (!host) {
      errno = EINVAL;  // vm_clock paused: the caller should have waited for resume()
      return false;
    }
    itimerspec spec{};
    spec.it_value = to_timespec(std::max(*host, Nanos{1}));
    spec.it_interval = to_timespec(round);
    thread_syscalls().add(Syscall::kTimerfdSettime);
    if (::timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, nullptr) != 0) return false;
  }
  return true;
}

void HostKernelPulseTrain::withdraw_locked() {
  refill_timer_.cancel();
  close_generation_locked();
}

void HostKernelPulseTrain::close_generation_locked() {
  if (gen_.eventfd < 0) return;
  reap_locked();
  // Unbind first: the polls cancelled below complete by signalling the eventfd, and that must
  // not reach the guest.
  if (gen_.attached) binding_.detach(gen_.eventfd);
  if (aio_ != 0) {
    for (std::size_t slot = 0; slot < gen_.in_flight.size(); ++slot) {
      if (!gen_.in_flight[slot]) continue;
      io_event ignored{};
      sys_io_cancel(aio_, &gen_.polls[slot], &ignored);  // EINPROGRESS: completes later
    }
  }
  // A cancelled poll may hold its timerfd open a little longer: disarm before closing.
  const itimerspec off{};
  for (int fd : gen_.timerfds) {
    ::timerfd_settime(fd, 0, &off, nullptr);
    ::close(fd);
  }
  ::close(gen_.eventfd);
  gen_ = Generation{};
}

namespace {
constexpr std::uint64_t kReadTag = std::uint64_t{1} << 31;  // aio_data: the clearing read
}  // namespace

void HostKernelPulseTrain::reap_locked() {
  if (aio_ == 0) return;
  std::array<io_event, 64> events{};
  for (;;) {
    timespec zero{};
    thread_syscalls().add(Syscall::kIoGetevents);
    const long n =
        sys_io_getevents(aio_, 0, static_cast<long>(events.size()), events.data(), &zero);
    if (n <= 0) return;
    for (long i = 0; i < n; ++i) {
      const io_event& ev = events[static_cast<std::size_t>(i)];
      // Completions of earlier generations are their cancelled polls (or an edge that beat the
      // unbinding by microseconds): counted when their generation was closed, or never.
      if (gen_.eventfd < 0 || (ev.data >> 32) != gen_.id) continue;
      const auto slot = static_cast<std::size_t>(ev.data & (kReadTag - 1));
      if (slot >= depth_) continue;
      if (ev.data & kReadTag) {
        // Expirations since the previous read: the one its poll reported, plus any that fired
        // while no poll was armed.
        if (ev.res == static_cast<std::int64_t>(sizeof(std::uint64_t)) && gen_.counts[slot] > 1) {
          stats_.missed += gen_.counts[slot] - 1;
        }
        continue;
      }
      gen_.in_flight[slot] = false;
      // A completed poll reports the ready mask (POLLIN); a cancelled one 0 or an error.
      if (ev.res > 0) {
        ++stats_.delivered;
        gen_.fired[slot] = true;
      }
    }
    if (static_cast<std::size_t>(n) < events.size()) return;
  }
}

bool HostKernelPulseTrain::refill_locked(Nanos now) {
  reap_locked();
  std::vector<iocb*>& batch = batch_;
  batch.clear();
  for (std::size_t slot = 0; slot < depth_; ++slot) {
    if (gen_.in_flight[slot]) continue;
    const std::uint64_t tag = std::uint64_t{gen_.id} << 32 | slot;
    if (gen_.fired[slot] && !aio_reads_) {
      // Kernels before 6.10 cannot AIO-read a timerfd: clear it with read(2) instead.
      thread_syscalls().add(Syscall::kRead);
      std::uint64_t count = 0;
      if (::read(gen_.timerfds[slot], &count, sizeof count) == sizeof count && count > 1) {
        stats_.missed += count - 1;
      }
      gen_.fired[slot] = false;
    }
    if (gen_.fired[slot]) {
      // Clear the expiration the last poll reported, or the new poll completes at once. An AIO
      // read of a non-blocking timerfd runs inside io_submit, before the poll after it.
      iocb& rd = gen_.reads[slot];
      rd = iocb{};
      rd.aio_lio_opcode = IOCB_CMD_PREAD;
      rd.aio_fildes = static_cast<std::uint32_t>(gen_.timerfds[slot]);
      rd.aio_buf = reinterpret_cast<std::uintptr_t>(&gen_.counts[slot]);
      rd.aio_nbytes = sizeof(std::uint64_t);
      rd.aio_data = tag | kReadTag;
      batch.push_back(&rd);
      gen_.fired[slot] = false;
    }
    iocb& cb = gen_.polls[slot];
    cb = iocb{};
    cb.aio_lio_opcode = IOCB_CMD_POLL;
    cb.aio_fildes = static_cast<std::uint32_t>(gen_.timerfds[slot]);
    cb.aio_buf = POLLIN;
    cb.aio_flags = IOCB_FLAG_RESFD;
    cb.aio_resfd = static_cast<std::uint32_t>(gen_.eventfd);
    cb.aio_data = tag;
    batch.push_back(&cb);
    gen_.in_flight[slot] = true;
    ++stats_.polls_submitted;
  }
  if (!batch.empty()) {
    thread_syscalls().add(Syscall::kIoSubmit);
    const long n = sys_io_submit(aio_, static_cast<long>(batch.size()), batch.data());
    const std::size_t submitted = n < 0 ? 0 : static_cast<std::size_t>(n);
    for (std::size_t i = submitted; i < batch.size(); ++i) {
      const auto slot = static_cast<std::size_t>(batch[i]->aio_data & (kReadTag - 1));
      if (batch[i]->aio_data & kReadTag) {
        gen_.fired[slot] = true;  // still readable
        continue;
      }
      gen_.in_flight[slot] = false;
      --stats_.polls_submitted;
    }
    if (submitted < batch.size()) {
      if (n >= 0) errno = EAGAIN;
      return false;
    }
  }
  ++stats_.refills;
  // Every fired slot gets its next poll within half a round, well before it fires again. The
  // refill lands halfway between two edges: the turn hook's reader of the guest's
  // acknowledgements then sees no edge that was delivered a moment ago and is still on its way
  // through KVM's irqfd worker (it would pass for one that merged).
  const auto half_round = static_cast<std::int64_t>(std::max<std::size_t>(depth_ / 2, 1));
  Nanos next = now + period_ * half_round;
  if (next > first_) {
    next = first_ + ((next - first_) / period_) * period_ + period_ / 2;
    if (next < now + period_ * half_round) next += period_;
  }
  refill_timer_.arm_at(next);
  return true;
}

void HostKernelPulseTrain::on_refill(const timers::Timer::Expiry& expiry) {
  TurnHook hook;
  {
    std::lock_guard lock(mu_);
    if (!running_ || suspended_) return;
    if (!refill_locked(expiry.now)) {  // the pass's clock reading: no second read
      const std::string why = give_up_locked("refill failed");
      if (binding_.failed) binding_.failed(why);
      return;
    }
    hook = turn_hook_;
  }
  // Outside mu_: the hook takes the device's lock, which comes before ours.
  if (hook) hook(expiry.now);
}

}  // namespace minivmm::vmm
