// `--poll auto`: the 2014 qemu_poll proposal done with measurements. It owns a PpollPoller and
// an EpollPoller (epoll_pwait2, nanosecond timeouts), keeps every fd registered in both, waits
// on the active one, and every so often tries the other for a few waits and switches only if it
// is cheaper by a margin. ppoll's cost grows with the fd count and epoll's does not, so the
// winner is decided by the fd count and by this host's syscall costs; neither is guessed.
//
// What "cost" means: the CPU time the loop thread spends in one wait (CLOCK_THREAD_CPUTIME_ID
// around the call, less the clock's own calibrated cost), not the time it sleeps. Reading that
// clock is a real syscall on x86 (no vDSO path: ~0.2-0.5 us here), so only trial waits are
// measured; between trials a wait costs one decrement and one branch more than the backend's.
//
// A trial: `trial_waits` measured waits on the active backend (the reference, measured right
// before so both windows see the same workload), then `trial_waits` on the other; the medians
// are compared. Each window starts with `warmup_waits` waits whose cost is discarded: the
// first wait on a backend after thousands on the other, and the first clock read after a long
// gap, run cold (measured here: a first ppoll of 0.5-4.3 us against 0.46 us warm; sparse single
// samples read ~150 ns high), and would bias the comparison. A trial that the other backend is
// clearly losing (its first `abort_after` waits all cost more than `abort_ratio` times the
// reference) ends early. A trial that keeps the backend doubles the interval to the next one
// (up to `max_trial_interval`); a switch, or the fd count doubling or halving since the last
// decision, brings the next trial back to `trial_interval`. A trial that costs much (ppoll at
// a thousand fds) is also spaced out to stay within `trial_budget`.
//
// Threads: loop thread only, like every Poller (stats() and decisions() included).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>

#include <nlohmann/json.hpp>
#include <memory>
#include <string_view>

#include "loop/epoll_poller.h"
#include "loop/poller.h"
#include "loop/ppoll_poller.h"

namespace minivmm::loop {

struct AutoPollerOptions {
  std::uint32_t trial_interval = 1024;       // waits between trials, after a switch or start
  std::uint32_t max_trial_interval = 1u << 16;  // ceiling of the doubling while nothing changes
  // A kept trial whose extra cost (its waits on the losing backend) would exceed this fraction
  // of the active backend's wait time until the next trial pushes the next trial out further,
  // past max_trial_interval up to budget_interval_cap: at 1024 fds one ppoll wait costs as much
  // as hundreds of epoll waits.
  double trial_budget = 0.005;
  std::uint32_t budget_interval_cap = 1u << 22;
  std::uint32_t trial_waits = 16;            // measured waits per window (reference and trial)
  std::uint32_t warmup_waits = 1;            // discarded at the start of each window
  double hysteresis = 0.05;                  // switch only if other < (1 - hysteresis) x current
  double abort_ratio = 2.0;                  // end a trial early when the other is this much worse
  std::uint32_t abort_after = 2;             // ...judged on the cheapest of its first waits
  std::size_t fd_change_min = 16;            // ignore fd-count changes smaller than this
  std::size_t decision_log_size = 64;        // decisions() keeps the most recent ones
};

enum class AutoReason {
  kOtherCheaper,    // switched: the other backend's median beat the margin
  kWithinMargin,    // kept: the other was cheaper, but by less than the hysteresis margin
  kCurrentCheaper,  // kept: the current backend was as cheap or cheaper
  kTrialAborted,    // kept: the other backend's first waits were all far more expensive
};

enum class AutoTrigger {
  kSchedule,       // the trial interval elapsed
  kFdCountChange,  // the fd count doubled or halved since the last decision
};

std::string_view auto_reason_name(AutoReason reason) noexcept;
std::string_view auto_trigger_name(AutoTrigger trigger) noexcept;

// One trial's outcome. Costs are medians of the windows, in nanoseconds of thread CPU time.
struct AutoDecision {
  std::uint64_t wait_index = 0;  // AutoPollerStats::waits when the decision was made
  PollerKind from = PollerKind::kPpoll;
  PollerKind to = PollerKind::kPpoll;  // == from when kept
  Nanos from_cost{0};
  Nanos to_cost{0};  // the other backend's cost (partial window when aborted)
  std::size_t fds = 0;
  AutoTrigger trigger = AutoTrigger::kSchedule;
  AutoReason reason = AutoReason::kCurrentCheaper;
};

struct AutoPollerStats {
  std::uint64_t waits = 0;
  std::uint64_t measured_waits = 0;  // waits timed with the cost source (trials only)
  std::uint64_t samples = 0;         // trials of the other backend started
  std::uint64_t switches = 0;
  std::uint64_t aborted_trials = 0;
  std::uint64_t decisions = 0;       // all of them, including those dropped from the log
  PollerKind active = PollerKind::kPpoll;
  Nanos ppoll_cost{0};  // per backend: EWMA (1/4) of its window medians; 0: never measured
  Nanos epoll_cost{0};
  std::uint32_t trial_interval = 0;  // current distance between trials
};

class AutoPoller final : public Poller {
 public:
  // Measures one wait. start() right before the wait, stop() right after; stop() returns the
  // wait's cost. Production: thread CPU time. Tests inject a fake cost per backend so the
  // switching logic is deterministic.
  class CostSource {
   public:
    virtual ~CostSource() = default;
    virtual void start() = 0;
    virtual Nanos stop(PollerKind measured, std::size_t fds) = 0;
  };

  // Throws std::system_error if epoll_create1 fails, std::invalid_argument on bad options.
  // `cost` null: thread CPU time (calibrated here, ~20 us).
  explicit AutoPoller(AutoPollerOptions options = {}, std::unique_ptr<CostSource> cost = nullptr);
  ~AutoPoller() override;
  AutoPoller(const AutoPoller&) = delete;
  AutoPoller& operator=(const AutoPoller&) = delete;

  PollerKind kind() const noexcept override { return PollerKind::kAuto; }
  // Mirrored into both backends; false (errno set) if either refuses, and then neither has it.
  bool add(int fd, std::uint32_t interest, bool edge) override;
  bool modify(int fd, std::uint32_t interest) override;
  void remove(int fd) override;
  // False: the active backend may be ppoll at any moment, so callers must read level-triggered
  // fds (a timerfd) themselves. An `edge` request still reaches epoll; callers passing it must
  // cope with level reports anyway.
  bool edge_supported() const noexcept override { return false; }
  int wait(std::optional<Nanos> timeout, std::vector<PollEvent>& ready) override;
  std::size_t size() const noexcept override { return ppoll_.size(); }

  PollerKind active_kind() const noexcept { return kind_of(active_); }
  AutoPollerStats stats() const noexcept;
  // Oldest first, at most options.decision_log_size entries.
  const std::deque<AutoDecision>& decisions() const noexcept { return log_; }
  // The stats and every decision with its reason, as the run report's "auto_poller" object.
  nlohmann::json report_json() const;
  const AutoPollerOptions& options() const noexcept { return options_; }

 private:
  enum class Phase { kSteady, kReference, kTrial };
  static constexpr std::size_t kMaxTrialWaits = 64;

  static PollerKind kind_of(std::size_t backend) noexcept {
    return backend == 0 ? PollerKind::kPpoll : PollerKind::kEpoll;
  }
  Poller& backend(std::size_t i) noexcept {
    return i == 0 ? static_cast<Poller&>(ppoll_) : static_cast<Poller&>(epoll_);
  }
  int wait_measured(std::optional<Nanos> timeout, std::vector<PollEvent>& ready);
  void decide(Nanos other_cost, bool aborted);
  void on_fd_count_changed();
  void reschedule() noexcept;
  void begin_window(Phase phase) noexcept;
  Nanos window_median() noexcept;
  void update_estimate(std::size_t backend, Nanos median) noexcept;

  const AutoPollerOptions options_;
  std::unique_ptr<CostSource> cost_;
  PpollPoller ppoll_;
  EpollPoller epoll_{false};

  std::size_t active_ = 0;        // 0 ppoll (the 2014 proposal's start), 1 epoll
  std::uint64_t waits_ = 0;
  std::uint64_t until_event_ = 1;  // fast-path countdown to the next trial
  std::uint64_t next_trial_at_ = 0;
  std::uint32_t interval_ = 0;
  Phase phase_ = Phase::kSteady;
  AutoTrigger trigger_ = AutoTrigger::kSchedule;
  std::size_t fds_at_decision_ = 0;

  std::array<Nanos, kMaxTrialWaits> window_{};
  std::size_t window_len_ = 0;      // samples kept in window_
  std::uint32_t window_warmup_ = 0;  // warm-up waits still to discard in this window
  Nanos reference_{0};            // median of the reference window of the running trial
  std::array<Nanos, 2> cost_estimate_{};  // 0: not measured yet (costs are clamped to >= 1)

  AutoPollerStats counters_;
  std::deque<AutoDecision> log_;
};

}  // namespace minivmm::loop
