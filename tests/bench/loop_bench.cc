// The cost of one event-loop iteration against the number of registered fds, per poll backend
// (issue 4). N idle eventfds plus one active eventfd: write to the active fd, run_once(), whose
// callback reads it back. The write happens before the wait, so the wait never sleeps: what is
// timed is the syscall work (and the loop's own dispatch), which is what grows with N for ppoll.
//
// The active fd is registered last, after the idle ones: ppoll walks (and queues itself on) every
// idle fd before it finds the ready one, its worst and most common case in a VMM whose busy fds
// are not the first ones opened.
//
// Usage: loop_bench [--csv=FILE] [--warmup=ITERATIONS] [--paired=ROUNDS] [--paired-csv=FILE]
//                   [Google Benchmark flags]
// With --benchmark_repetitions=R the table and the CSV use the median of the R repetitions.
// --paired=ROUNDS then also runs the paired mode (below): the auto / best ratio per round.
// --benchmark_filter=NONE (matching nothing) with --paired runs the paired mode alone.
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <memory>
#include <string>
#include <vector>

#include "loop/auto_poller.h"
#include "loop/event_loop.h"
#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"

namespace minivmm::loop {
namespace {

constexpr int kFdCounts[] = {1, 4, 16, 64, 256, 1024};
constexpr PollerKind kBackends[] = {PollerKind::kPpoll, PollerKind::kEpoll,
                                    PollerKind::kTimerfdEpoll, PollerKind::kAuto};

// Untimed iterations per run (caches, branch predictors); auto also warms up until its second
// decision, so the table shows its steady state and not its first few thousand waits on ppoll.
std::int64_t g_warmup = 2'000;
constexpr std::int64_t kAutoWarmupCap = 200'000;

void raise_fd_limit(rlim_t needed) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= needed) return;
  lim.rlim_cur = std::min(lim.rlim_max, needed);
  setrlimit(RLIMIT_NOFILE, &lim);
}

int make_eventfd() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    std::perror("eventfd");
    std::exit(1);
  }
  return fd;
}

// One loop with N idle eventfds and one active eventfd, registered last.
class Rig {
 public:
  Rig(PollerKind kind, std::size_t idle_fds) : loop_(make_poller(kind), dynticks_) {
    raise_fd_limit(static_cast<rlim_t>(3 * idle_fds) + 64);  // the paired mode has three rigs
    idle_.reserve(idle_fds);
    for (std::size_t i = 0; i < idle_fds; ++i) {
      idle_.push_back(make_eventfd());
      loop_.watch(idle_.back(), kReadable, FdHandlers{[] {}, {}, {}});
    }
    active_ = make_eventfd();
    loop_.watch(active_, kReadable, FdHandlers{[this] {
                  std::uint64_t v = 0;
                  if (::read(active_, &v, sizeof v) == sizeof v) ++reads_;
                }, {}, {}});
  }
  ~Rig() {
    for (int fd : idle_) {
      loop_.unwatch(fd);
      ::close(fd);
    }
    loop_.unwatch(active_);
    ::close(active_);
  }
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  // wake -> callback -> wait again. False on a host failure.
  bool iterate() {
    const std::uint64_t one = 1;
    return ::write(active_, &one, sizeof one) == sizeof one && loop_.run_once();
  }
  // The fixed warm-up, and auto's first two decisions (its convergence, not its steady state).
  bool warm_up() {
    AutoPoller* a = auto_poller();
    for (std::int64_t i = 0; i < g_warmup || (a && a->stats().decisions < 2 && i < kAutoWarmupCap);
         ++i) {
      if (!iterate()) return false;
    }
    return true;
  }
  AutoPoller* auto_poller() {
    return loop_.poller().kind() == PollerKind::kAuto ? static_cast<AutoPoller*>(&loop_.poller())
                                                      : nullptr;
  }
  std::uint64_t reads() const { return reads_; }

 private:
  timers::MonotonicClock clock_;
  timers::PollTimeoutAlarm alarm_;  // no timer fd, no timers: every wait has no timeout
  timers::Dynticks dynticks_{alarm_, clock_, {}};
  EventLoop loop_;
  std::vector<int> idle_;
  int active_ = -1;
  std::uint64_t reads_ = 0;
};

void loop_iteration(benchmark::State& state, PollerKind kind) {
  Rig rig(kind, static_cast<std::size_t>(state.range(0)));
  if (!rig.warm_up()) {
    state.SkipWithError("write or run_once failed");
    return;
  }
  AutoPoller* autop = rig.auto_poller();
  const AutoPollerStats before = autop ? autop->stats() : AutoPollerStats{};
  const std::uint64_t reads_before = rig.reads();

  for (auto _ : state) {
    if (!rig.iterate()) {
      state.SkipWithError("write or run_once failed");
      break;
    }
  }

  if (rig.reads() - reads_before != static_cast<std::uint64_t>(state.iterations())) {
    state.SkipWithError("the callback did not run once per iteration");
  }
  if (autop) {
    const AutoPollerStats s = autop->stats();
    state.counters["on_epoll"] = s.active == PollerKind::kEpoll ? 1 : 0;
    state.counters["switches"] = static_cast<double>(s.switches - before.switches);
    state.counters["trials"] = static_cast<double>(s.samples - before.samples);
    state.counters["ppoll_wait_ns"] = static_cast<double>(s.ppoll_cost.count());
    state.counters["epoll_wait_ns"] = static_cast<double>(s.epoll_cost.count());
  }
}

// ---- Paired mode: the ratio auto / best, with slow host noise cancelled. ----
//
// Three rigs (ppoll, epoll, auto) live side by side. Each round times one block of each, in a
// shuffled order, with the thread's CPU clock, and forms auto / min(ppoll, epoll) from that
// round alone: a neighbour that slows the host for a second slows all three blocks of a round
// alike, so the per-round ratio keeps its meaning when absolute times drift by 10%.

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

struct PairedResult {
  int fds = 0;
  double ppoll_ns = 0, epoll_ns = 0, auto_ns = 0;  // medians over rounds
  double ratio_median = 0, ratio_p25 = 0, ratio_p75 = 0;
  int rounds = 0;
  std::string auto_on;
};

bool run_paired(int n, int rounds, PairedResult& out) {
  const auto fds = static_cast<std::size_t>(n);
  Rig ppoll(PollerKind::kPpoll, fds), epoll(PollerKind::kEpoll, fds), autor(PollerKind::kAuto, fds);
  Rig* rigs[3] = {&ppoll, &epoll, &autor};
  for (Rig* r : rigs) {
    if (!r->warm_up()) return false;
  }
  // Blocks of about 2 ms each, sized from a first timing.
  std::int64_t iters[3];
  for (int i = 0; i < 3; ++i) {
    const double t0 = thread_cpu_ns();
    for (int k = 0; k < 200; ++k) {
      if (!rigs[i]->iterate()) return false;
    }
    const double per = (thread_cpu_ns() - t0) / 200;
    iters[i] = std::clamp<std::int64_t>(static_cast<std::int64_t>(2e6 / per), 20, 20'000);
  }
  std::vector<double> ns[3], ratio;
  std::mt19937 rng(12345);
  int order[3] = {0, 1, 2};
  for (int round = 0; round < rounds; ++round) {
    std::shuffle(std::begin(order), std::end(order), rng);
    double per[3];
    for (int i : order) {
      const double t0 = thread_cpu_ns();
      for (std::int64_t k = 0; k < iters[i]; ++k) {
        if (!rigs[i]->iterate()) return false;
      }
      per[i] = (thread_cpu_ns() - t0) / static_cast<double>(iters[i]);
      ns[i].push_back(per[i]);
    }
    ratio.push_back(per[2] / std::min(per[0], per[1]));
  }
  out.fds = n;
  out.ppoll_ns = quantile(ns[0], 0.5);
  out.epoll_ns = quantile(ns[1], 0.5);
  out.auto_ns = quantile(ns[2], 0.5);
  out.ratio_median = quantile(ratio, 0.5);
  out.ratio_p25 = quantile(ratio, 0.25);
  out.ratio_p75 = quantile(ratio, 0.75);
  out.rounds = rounds;
  out.auto_on = std::string(poller_kind_name(autor.auto_poller()->active_kind()));
  return true;
}

void paired_mode(int rounds, const std::string& csv_path) {
  std::vector<PairedResult> results;
  std::printf("\npaired rounds (%d per fd count): auto / min(ppoll, epoll), per round\n", rounds);
  std::printf("%6s %10s %10s %10s %10s %18s %8s\n", "fds", "ppoll", "epoll", "auto", "median",
              "[p25, p75]", "auto on");
  for (int n : kFdCounts) {
    PairedResult r;
    if (!run_paired(n, rounds, r)) {
      std::fprintf(stderr, "loop_bench: paired run at %d fds failed\n", n);
      std::exit(1);
    }
    std::printf("%6d %10.0f %10.0f %10.0f %10.3f   [%.3f, %.3f] %8s\n", r.fds, r.ppoll_ns,
                r.epoll_ns, r.auto_ns, r.ratio_median, r.ratio_p25, r.ratio_p75,
                r.auto_on.c_str());
    std::fflush(stdout);
    results.push_back(r);
  }
  if (csv_path.empty()) return;
  std::ofstream out(csv_path);
  out << "fds,ppoll_ns,epoll_ns,auto_ns,ratio_median,ratio_p25,ratio_p75,rounds,auto_on\n";
  for (const PairedResult& r : results) {
    out << r.fds << ',' << r.ppoll_ns << ',' << r.epoll_ns << ',' << r.auto_ns << ','
        << r.ratio_median << ',' << r.ratio_p25 << ',' << r.ratio_p75 << ',' << r.rounds << ','
        << r.auto_on << '\n';
  }
  if (!out) std::cerr << "loop_bench: cannot write " << csv_path << '\n';
}

struct Result {
  double cpu_ns = 0;
  double real_ns = 0;
  double on_epoll = -1;  // auto only
  double switches = -1;
};

// Prints as the console reporter does, and keeps one result per (backend, N): the median when
// there are repetitions, else the single run.
class CollectingReporter final : public benchmark::ConsoleReporter {
 public:
  // Colour only on a terminal: the script tees the output into a file.
  CollectingReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      const bool single = r.run_type == Run::RT_Iteration && r.repetitions <= 1;
      if (!median && !single) continue;
      // "loop/<backend>" with args "<N>".
      const std::string& f = r.run_name.function_name;
      const std::string backend = f.substr(f.find('/') + 1);
      Result res;
      res.cpu_ns = r.GetAdjustedCPUTime();
      res.real_ns = r.GetAdjustedRealTime();
      if (auto it = r.counters.find("on_epoll"); it != r.counters.end()) res.on_epoll = it->second;
      if (auto it = r.counters.find("switches"); it != r.counters.end()) res.switches = it->second;
      results_[backend][std::stoi(r.run_name.args)] = res;
    }
  }

  const std::map<std::string, std::map<int, Result>>& results() const { return results_; }

 private:
  std::map<std::string, std::map<int, Result>> results_;
};

void print_table(const CollectingReporter& rep) {
  const auto& res = rep.results();
  if (res.empty()) return;  // --benchmark_filter matched nothing (the paired mode alone)
  auto get = [&](std::string_view b, int n) -> const Result* {
    auto it = res.find(std::string(b));
    if (it == res.end()) return nullptr;
    auto jt = it->second.find(n);
    return jt == it->second.end() ? nullptr : &jt->second;
  };
  std::printf("\nns per loop iteration (CPU time, median of repetitions)\n");
  std::printf("%6s %10s %10s %14s %10s %12s %8s\n", "fds", "ppoll", "epoll", "timerfd-epoll",
              "auto", "auto/best", "auto on");
  for (int n : kFdCounts) {
    std::printf("%6d", n);
    for (PollerKind k : kBackends) {
      const Result* r = get(poller_kind_name(k), n);
      const int width = k == PollerKind::kTimerfdEpoll ? 14 : 10;
      if (r) {
        std::printf(" %*.0f", width, r->cpu_ns);
      } else {
        std::printf(" %*s", width, "-");
      }
    }
    const Result* p = get("ppoll", n);
    const Result* e = get("epoll", n);
    const Result* a = get("auto", n);
    if (p && e && a) {
      const double best = std::min(p->cpu_ns, e->cpu_ns);
      std::printf(" %12.3f %8s", a->cpu_ns / best, a->on_epoll >= 0.5 ? "epoll" : "ppoll");
    }
    std::printf("\n");
  }
}

void write_csv(const CollectingReporter& rep, const std::string& path) {
  std::ofstream out(path);
  out << "backend,fds,cpu_ns,real_ns,auto_on_epoll,auto_switches\n";
  for (const auto& [backend, by_n] : rep.results()) {
    for (const auto& [n, r] : by_n) {
      out << backend << ',' << n << ',' << r.cpu_ns << ',' << r.real_ns << ',';
      if (r.on_epoll >= 0) out << r.on_epoll << ',' << r.switches;
      else out << ',';
      out << '\n';
    }
  }
  if (!out) std::cerr << "loop_bench: cannot write " << path << '\n';
}

}  // namespace
}  // namespace minivmm::loop

int main(int argc, char** argv) {
  using namespace minivmm::loop;
  std::string csv_path;
  std::string paired_csv_path;
  int paired_rounds = 0;
  // Our flags first; everything else is Google Benchmark's.
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--csv=", 0) == 0) {
      csv_path = a.substr(6);
    } else if (a.rfind("--paired=", 0) == 0) {
      paired_rounds = std::stoi(a.substr(9));
    } else if (a.rfind("--paired-csv=", 0) == 0) {
      paired_csv_path = a.substr(13);
    } else if (a.rfind("--warmup=", 0) == 0) {
      g_warmup = std::stoll(a.substr(9));
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;

  for (PollerKind k : kBackends) {
    const std::string name = "loop/" + std::string(poller_kind_name(k));
    auto* b = benchmark::RegisterBenchmark(name.c_str(), loop_iteration, k);
    for (int n : kFdCounts) b->Arg(n);
  }

  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  print_table(reporter);
  if (!csv_path.empty()) write_csv(reporter, csv_path);
  if (paired_rounds > 0) paired_mode(paired_rounds, paired_csv_path);
  return 0;
}
