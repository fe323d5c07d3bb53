#include "loop/auto_poller.h"

#include "timers/syscall_counters.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

namespace minivmm::loop {
namespace {

// Thread CPU time excludes the time blocked, so around a wait it is the wait's own CPU work,
// whether the wait slept or not. It is not on the vDSO fast path (x86 serves only the
// wall/monotonic clocks there), so each read is a syscall; its own cost, which the difference
// of two reads includes once, is calibrated away.
class ThreadCpuCost final : public AutoPoller::CostSource {
 public:
  ThreadCpuCost() {
    Nanos best = Nanos::max();
    for (int i = 0; i < 32; ++i) {
      const Nanos a = read();
      best = std::min(best, read() - a);
    }
    overhead_ = best;
  }

  void start() override { start_ = read(); }

  Nanos stop(PollerKind /*measured*/, std::size_t /*fds*/) override {
    return std::max(read() - start_ - overhead_, Nanos{1});
  }

 private:
  static Nanos read() noexcept {
    timespec ts{};
    // Not served by the vDSO: a real syscall, counted with the loop's.
    timers::thread_syscalls().add(timers::Syscall::kClockGettime);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return Nanos{static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec};
  }

  Nanos start_{0};
  Nanos overhead_{0};
};

void validate(const AutoPollerOptions& o) {
  if (o.trial_interval == 0 || o.max_trial_interval < o.trial_interval ||
      o.trial_waits == 0 || o.trial_waits > 64 || o.abort_after == 0 ||
      o.abort_after > o.trial_waits || o.hysteresis < 0 || o.hysteresis >= 1 ||
      o.abort_ratio <= 1 || o.decision_log_size == 0 || o.trial_budget <= 0 ||
      o.budget_interval_cap < o.max_trial_interval) {
    throw std::invalid_argument("AutoPollerOptions out of range");
  }
}

}  // namespace

std::string_view auto_reason_name(AutoReason reason) noexcept {
  switch (reason) {
    case AutoReason::kOtherCheaper: return "other cheaper";
    case AutoReason::kWithinMargin: return "other cheaper within margin";
    case AutoReason::kCurrentCheaper: return "current cheaper";
    case AutoReason::kTrialAborted: return "other far costlier, trial aborted";
  }
  return "?";
}

std::string_view auto_trigger_name(AutoTrigger trigger) noexcept {
  switch (trigger) {
    case AutoTrigger::kSchedule: return "schedule";
    case AutoTrigger::kFdCountChange: return "fd count change";
  }
  return "?";
}

AutoPoller::AutoPoller(AutoPollerOptions options, std::unique_ptr<CostSource> cost)
    : options_(options), cost_(std::move(cost)) {
  validate(options_);
  if (!cost_) cost_ = std::make_unique<ThreadCpuCost>();
  interval_ = options_.trial_interval;
  next_trial_at_ = options_.trial_interval;
  reschedule();
}

AutoPoller::~AutoPoller() = default;

bool AutoPoller::add(int fd, std::uint32_t interest, bool edge) {
  if (!ppoll_.add(fd, interest, edge)) return false;
  if (!epoll_.add(fd, interest, edge)) {
    const int err = errno;
    ppoll_.remove(fd);
    errno = err;
    return false;
  }
  on_fd_count_changed();
  return true;
}

bool AutoPoller::modify(int fd, std::uint32_t interest) {
  // ppoll's modify only fails for an unknown fd, and then epoll's would too.
  if (!ppoll_.modify(fd, interest)) return false;
  return epoll_.modify(fd, interest);
}

void AutoPoller::remove(int fd) {
  ppoll_.remove(fd);
  epoll_.remove(fd);
  on_fd_count_changed();
}

void AutoPoller::on_fd_count_changed() {
  // ppoll's cost is linear in the fd count: a doubling or halving can move the crossover, so
  // the next trial comes soon instead of after a backed-off interval.
  const std::size_t now = size();
  const std::size_t then = fds_at_decision_;
  const bool grew = now >= 2 * then && now - then >= options_.fd_change_min;
  const bool shrank = 2 * now <= then && then - now >= options_.fd_change_min;
  if (!grew && !shrank) return;
  fds_at_decision_ = now;  // one trigger per doubling, not one per added fd
  interval_ = options_.trial_interval;
  if (phase_ == Phase::kSteady) {
    trigger_ = AutoTrigger::kFdCountChange;
    // A few waits of delay: fds usually come in bursts, and a wait with half of them is no
    // measurement of the other half.
    next_trial_at_ = std::min(next_trial_at_, waits_ + options_.trial_waits);
    reschedule();
  }
}

void AutoPoller::reschedule() noexcept {
  if (phase_ != Phase::kSteady) {
    until_event_ = 1;
    return;
  }
  until_event_ = next_trial_at_ > waits_ ? next_trial_at_ - waits_ : 1;
}

void AutoPoller::begin_window(Phase phase) noexcept {
  phase_ = phase;
  window_len_ = 0;
  window_warmup_ = options_.warmup_waits;
}

int AutoPoller::wait(std::optional<Nanos> timeout, std::vector<PollEvent>& ready) {
  ++waits_;
  // The fast path: one decrement and one branch over a plain wait.
  if (--until_event_ != 0) return backend(active_).wait(timeout, ready);
  return wait_measured(timeout, ready);
}

int AutoPoller::wait_measured(std::optional<Nanos> timeout, std::vector<PollEvent>& ready) {
  if (phase_ == Phase::kSteady) begin_window(Phase::kReference);
  const std::size_t measured = phase_ == Phase::kTrial ? 1 - active_ : active_;
  cost_->start();
  const int n = backend(measured).wait(timeout, ready);
  const Nanos cost = std::max(cost_->stop(kind_of(measured), size()), Nanos{1});
  ++counters_.measured_waits;
  if (n < 0 || window_warmup_ > 0) {
    if (n >= 0) --window_warmup_;
    reschedule();
    return n;
  }

  window_[window_len_++] = cost;
  if (phase_ == Phase::kReference) {
    if (window_len_ == options_.trial_waits) {
      reference_ = window_median();
      update_estimate(active_, reference_);
      begin_window(Phase::kTrial);
      ++counters_.samples;
    }
  } else {
    const auto end = window_.begin() + static_cast<std::ptrdiff_t>(window_len_);
    const bool aborted =
        window_len_ == options_.abort_after &&
        static_cast<double>(std::min_element(window_.begin(), end)->count()) >
            options_.abort_ratio * static_cast<double>(reference_.count());
    if (aborted || window_len_ == options_.trial_waits) decide(window_median(), aborted);
  }
  reschedule();
  return n;
}

Nanos AutoPoller::window_median() noexcept {
  const auto end = window_.begin() + static_cast<std::ptrdiff_t>(window_len_);
  const auto mid = window_.begin() + static_cast<std::ptrdiff_t>(window_len_ / 2);
  std::nth_element(window_.begin(), mid, end);
  return *mid;
}

void AutoPoller::update_estimate(std::size_t backend, Nanos median) noexcept {
  Nanos& est = cost_estimate_[backend];
  est = est == Nanos{0} ? median : est + (median - est) / 4;
}

void AutoPoller::decide(Nanos other_cost, bool aborted) {
  const std::size_t other = 1 - active_;
  update_estimate(other, other_cost);

  AutoDecision d;
  d.wait_index = waits_;
  d.from = kind_of(active_);
  d.from_cost = reference_;
  d.to_cost = other_cost;
  d.fds = size();
  d.trigger = trigger_;

  const double cur = static_cast<double>(reference_.count());
  const double oth = static_cast<double>(other_cost.count());
  if (aborted) {
    d.reason = AutoReason::kTrialAborted;
    ++counters_.aborted_trials;
  } else if (oth < (1.0 - options_.hysteresis) * cur) {
    d.reason = AutoReason::kOtherCheaper;
  } else if (oth < cur) {
    d.reason = AutoReason::kWithinMargin;
  } else {
    d.reason = AutoReason::kCurrentCheaper;
  }

  if (d.reason == AutoReason::kOtherCheaper) {
    active_ = other;
    ++counters_.switches;
    interval_ = options_.trial_interval;  // confirm a switch soon
  } else {
    const double doubled =
        std::min<double>(2.0 * interval_, static_cast<double>(options_.max_trial_interval));
    // What this trial cost beyond staying put (its warm-up waits included), in units of the
    // active backend's waits.
    const double extra =
        std::max(oth - cur, 0.0) * static_cast<double>(window_len_ + options_.warmup_waits);
    const double budgeted = std::min(extra / (options_.trial_budget * cur),
                                     static_cast<double>(options_.budget_interval_cap));
    interval_ = static_cast<std::uint32_t>(std::max(doubled, budgeted));
  }
  d.to = kind_of(active_);

  ++counters_.decisions;
  log_.push_back(d);
  while (log_.size() > options_.decision_log_size) log_.pop_front();

  phase_ = Phase::kSteady;
  trigger_ = AutoTrigger::kSchedule;
  fds_at_decision_ = d.fds;
  window_len_ = 0;
  next_trial_at_ = waits_ + interval_;
}

AutoPollerStats AutoPoller::stats() const noexcept {
  AutoPollerStats s = counters_;
  s.waits = waits_;
  s.active = kind_of(active_);
  s.ppoll_cost = cost_estimate_[0];
  s.epoll_cost = cost_estimate_[1];
  s.trial_interval = interval_;
  return s;
}

nlohmann::json AutoPoller::report_json() const {
  const auto s = stats();
  nlohmann::json log = nlohmann::json::array();
  for (const auto& d : decisions()) {
    log.push_back({{"wait", d.wait_index},
                   {"from", std::string(poller_kind_name(d.from))},
                   {"to", std::string(poller_kind_name(d.to))},
                   {"from_ns", d.from_cost.count()},
                   {"to_ns", d.to_cost.count()},
                   {"fds", d.fds},
                   {"trigger", std::string(auto_trigger_name(d.trigger))},
                   {"reason", std::string(auto_reason_name(d.reason))}});
  }
  return {{"active", std::string(poller_kind_name(s.active))},
          {"waits", s.waits},
          {"measured_waits", s.measured_waits},
          {"trials", s.samples},
          {"switches", s.switches},
          {"aborted_trials", s.aborted_trials},
          {"ppoll_wait_ns", s.ppoll_cost.count()},
          {"epoll_wait_ns", s.epoll_cost.count()},
          {"trial_interval", s.trial_interval},
          {"decisions", log}};
}

}  // namespace minivmm::loop
