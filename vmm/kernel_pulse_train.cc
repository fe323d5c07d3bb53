#include "vmm/kernel_pulse_train.h"

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

#include <spdlog/spdlog.h>

#include "timers/syscall_counters.h"

namespace minivmm::vmm {
namespace {

using timers::Nanos;
using timers::Syscall;
using timers::thread_syscalls;

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

timespec to_timespec(Nanos n) {
  return timespec{static_cast<time_t>(n.count() / 1'000'000'000),
                  static_cast<long>(n.count() % 1'000'000'000)};
}

}  // namespace

KernelPulseTrain::KernelPulseTrain(timers::TimerList& vm_timers, Binding binding,
                                   std::size_t max_depth)
    : clock_(vm_timers.clock()),
      binding_(std::move(binding)),
      max_depth_(std::max<std::size_t>(max_depth, 2)),
      refill_timer_(vm_timers, "pulse-train-refill",
                    [this](const timers::Timer::Expiry& e) { on_refill(e); }) {}

KernelPulseTrain::~KernelPulseTrain() {
  refill_timer_.cancel();
  std::lock_guard lock(mu_);
  close_generation_locked();
  if (aio_ != 0) sys_io_destroy(aio_);
}

bool KernelPulseTrain::start(Nanos first, Nanos period) noexcept {
  std::lock_guard lock(mu_);
  close_generation_locked();
  refill_timer_.cancel();
  running_ = false;
  if (period <= Nanos{0}) return false;
  first_ = first;
  period_ = period;
  next_ = first;
  depth_ = std::clamp<std::size_t>(static_cast<std::size_t>(kLookahead / period), 2, max_depth_);
  // The refill may ride on another wakeup up to a quarter of the schedule late.
  refill_timer_.set_slack(period * static_cast<std::int64_t>(depth_ / 4));
  running_ = true;
  if (suspended_) return true;  // armed on resume()
  if (open_generation_locked() && fill_locked(clock_.now())) return true;
  ++stats_.failures;
  spdlog::warn("PIT pulse train unavailable ({}): the PIT's own timer delivers the ticks",
               std::strerror(errno));
  close_generation_locked();
  refill_timer_.cancel();
  running_ = false;
  return false;
}

void KernelPulseTrain::stop() noexcept {
  std::lock_guard lock(mu_);
  running_ = false;
  refill_timer_.cancel();
  close_generation_locked();
}

std::uint64_t KernelPulseTrain::delivered() noexcept {
  std::lock_guard lock(mu_);
  reap_locked();
  return stats_.delivered;
}

KernelPulseTrain::Stats KernelPulseTrain::stats() noexcept {
  std::lock_guard lock(mu_);
  reap_locked();
  return stats_;
}

void KernelPulseTrain::suspend() noexcept {
  std::lock_guard lock(mu_);
  suspended_ = true;
  refill_timer_.cancel();
  close_generation_locked();
}

void KernelPulseTrain::resume() noexcept {
  std::lock_guard lock(mu_);
  if (!suspended_) return;
  suspended_ = false;
  if (!running_) return;
  // Edges armed before the pause were withdrawn; vm_clock stood still meanwhile, so the next
  // edge of the grid after now is the first one the guest has not had.
  const Nanos now = clock_.now();
  next_ = now < first_ ? first_ : first_ + ((now - first_) / period_ + 1) * period_;
  if (open_generation_locked() && fill_locked(now)) return;
  ++stats_.failures;
  const std::string why = std::string("PIT pulse train: cannot re-arm after resume: ") +
                          std::strerror(errno);
  close_generation_locked();
  running_ = false;
  if (binding_.failed) binding_.failed(why);
}

bool KernelPulseTrain::open_generation_locked() {
  Generation g;
  g.eventfd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g.eventfd < 0) return false;
  gen_ = std::move(g);
  try {
    binding_.attach(gen_.eventfd);
  } catch (const std::exception& e) {
    spdlog::error("PIT pulse train: {}", e.what());
    return false;
  }
  gen_.attached = true;
  // Room for one schedule's completions plus the cancelled polls of a few earlier ones.
  if (aio_ == 0 && sys_io_setup(static_cast<unsigned>(4 * max_depth_), &aio_) < 0) {
    aio_ = 0;
    return false;
  }
  gen_.id = next_generation_++;
  gen_.iocbs.assign(depth_, iocb{});
  gen_.in_flight.assign(depth_, false);
  for (std::size_t i = 0; i < depth_; ++i) {
    const int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (fd < 0) return false;
    gen_.timerfds.push_back(fd);
  }
  ++stats_.generations;
  return true;
}

void KernelPulseTrain::close_generation_locked() {
  if (gen_.eventfd < 0) return;
  reap_locked();
  // Unbind first: the polls cancelled below complete by signalling the eventfd, and that must
  // not reach the guest.
  if (gen_.attached) binding_.detach(gen_.eventfd);
  if (aio_ != 0) {
    for (std::size_t slot = 0; slot < gen_.in_flight.size(); ++slot) {
      if (!gen_.in_flight[slot]) continue;
      io_event ignored{};
      sys_io_cancel(aio_, &gen_.iocbs[slot], &ignored);  // EINPROGRESS: completes later
    }
  }
  for (int fd : gen_.timerfds) ::close(fd);
  ::close(gen_.eventfd);
  gen_ = Generation{};
}

void KernelPulseTrain::reap_locked() {
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
      const auto slot = static_cast<std::size_t>(ev.data & 0xffffffffu);
      if (slot < gen_.in_flight.size()) gen_.in_flight[slot] = false;
      // A completed poll reports the ready mask (POLLIN); a cancelled one 0 or an error.
      if (ev.res > 0) ++stats_.delivered;
    }
    if (static_cast<std::size_t>(n) < events.size()) return;
  }
}

bool KernelPulseTrain::fill_locked(Nanos now) {
  reap_locked();
  if (next_ + period_ < now) {
    // Behind by more than a period (the loop could not refill in time): arming each missed edge
    // would fire them all at once, and KVM's irqfd would merge them anyway. Skip to the grid.
    const auto behind = (now - next_) / period_;
    stats_.skipped += static_cast<std::uint64_t>(behind);
    next_ += behind * period_;
  }
  std::size_t armed =
      static_cast<std::size_t>(std::count(gen_.in_flight.begin(), gen_.in_flight.end(), true));
  std::vector<iocb*> batch;
  batch.reserve(depth_);
  for (std::size_t slot = 0; slot < depth_ && armed < depth_; ++slot) {
    if (gen_.in_flight[slot]) continue;
    const auto host = clock_.to_monotonic(next_);
    if (!host) break;  // vm_clock paused: resume() re-arms
    itimerspec spec{};
    spec.it_value = to_timespec(std::max(*host, Nanos{1}));
    thread_syscalls().add(Syscall::kTimerfdSettime);
    if (::timerfd_settime(gen_.timerfds[slot], TFD_TIMER_ABSTIME, &spec, nullptr) != 0) {
      return false;
    }
    ++stats_.edges_armed;
    iocb& cb = gen_.iocbs[slot];
    cb = iocb{};
    cb.aio_lio_opcode = IOCB_CMD_POLL;
    cb.aio_fildes = static_cast<std::uint32_t>(gen_.timerfds[slot]);
    cb.aio_buf = POLLIN;
    cb.aio_flags = IOCB_FLAG_RESFD;
    cb.aio_resfd = static_cast<std::uint32_t>(gen_.eventfd);
    cb.aio_data = (std::uint64_t{gen_.id} << 32) | slot;
    batch.push_back(&cb);
    gen_.in_flight[slot] = true;
    ++armed;
    next_ += period_;
  }
  if (!batch.empty()) {
    thread_syscalls().add(Syscall::kIoSubmit);
    const long n = sys_io_submit(aio_, static_cast<long>(batch.size()), batch.data());
    const std::size_t submitted = n < 0 ? 0 : static_cast<std::size_t>(n);
    for (std::size_t i = submitted; i < batch.size(); ++i) {
      gen_.in_flight[static_cast<std::size_t>(batch[i]->aio_data & 0xffffffffu)] = false;
    }
    if (submitted < batch.size()) {
      if (n >= 0) errno = EAGAIN;
      return false;
    }
  }
  ++stats_.refills;
  // Refill when half the armed edges have fired.
  const Nanos refill_at = next_ - period_ * static_cast<std::int64_t>(depth_ / 2);
  refill_timer_.arm_at(std::max(refill_at, now + period_ / 2));
  return true;
}

void KernelPulseTrain::on_refill(const timers::Timer::Expiry& expiry) {
  std::lock_guard lock(mu_);
  if (!running_ || suspended_) return;
  if (fill_locked(expiry.now)) return;  // the pass's clock reading: no second read
  ++stats_.failures;
  const std::string why = std::string("PIT pulse train: refill failed: ") + std::strerror(errno);
  close_generation_locked();
  running_ = false;
  if (binding_.failed) binding_.failed(why);
}

}  // namespace minivmm::vmm
