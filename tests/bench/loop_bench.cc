// The cost of one event-loop iteration against the number of registered fds, per poll backend
// (issue 4). N idle eventfds plus one active eventfd: write to the active fd, run_once(), whose
// callback reads it back. The write happens before the wait, so the wait never sleeps: what is
// timed is the syscall work (and the loop's own dispatch), which is what grows with N for ppoll.
//
// The active fd is registered last, after the idle ones: ppoll walks (and queues itself on) every
// idle fd before it finds the ready one, its worst and most common case in a VMM whose busy fds
// are not the first ones opened.
//
// Usage: loop_bench [--csv=FILE] [--warmup=ITERATIONS] [Google Benchmark flags]
// With --benchmark_repetitions=R the table and the CSV use the median of the R repetitions.
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
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

void loop_iteration(benchmark::State& state, PollerKind kind) {
  const auto n = static_cast<std::size_t>(state.range(0));
  raise_fd_limit(static_cast<rlim_t>(n) + 64);

  timers::MonotonicClock clock;
  timers::PollTimeoutAlarm alarm;  // no timer fd, no timers: every wait has no timeout
  timers::Dynticks dynticks(alarm, clock, {});
  EventLoop loop(make_poller(kind), dynticks);

  std::vector<int> idle;
  idle.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    idle.push_back(make_eventfd());
    loop.watch(idle.back(), kReadable, FdHandlers{[] {}, {}, {}});
  }
  const int active = make_eventfd();
  std::uint64_t reads = 0;
  loop.watch(active, kReadable, FdHandlers{[&] {
               std::uint64_t v = 0;
               if (::read(active, &v, sizeof v) == sizeof v) ++reads;
             }, {}, {}});

  const std::uint64_t one = 1;
  auto iterate = [&] {
    if (::write(active, &one, sizeof one) != sizeof one || !loop.run_once()) {
      state.SkipWithError("write or run_once failed");
      return false;
    }
    return true;
  };
  auto* autop = kind == PollerKind::kAuto ? static_cast<AutoPoller*>(&loop.poller()) : nullptr;
  for (std::int64_t i = 0; i < g_warmup || (autop && autop->stats().decisions < 2 && i < kAutoWarmupCap); ++i) {
    if (!iterate()) return;
  }
  const std::uint64_t switches_before = autop ? autop->stats().switches : 0;
  const std::uint64_t trials_before = autop ? autop->stats().samples : 0;
  const std::uint64_t reads_before = reads;

  for (auto _ : state) {
    if (!iterate()) break;
  }

  if (reads - reads_before != static_cast<std::uint64_t>(state.iterations())) {
    state.SkipWithError("the callback did not run once per iteration");
  }
  if (autop) {
    const AutoPollerStats s = autop->stats();
    state.counters["on_epoll"] = s.active == PollerKind::kEpoll ? 1 : 0;
    state.counters["switches"] = static_cast<double>(s.switches - switches_before);
    state.counters["trials"] = static_cast<double>(s.samples - trials_before);
    state.counters["ppoll_wait_ns"] = static_cast<double>(s.ppoll_cost.count());
    state.counters["epoll_wait_ns"] = static_cast<double>(s.epoll_cost.count());
  }
  for (int fd : idle) {
    loop.unwatch(fd);
    ::close(fd);
  }
  loop.unwatch(active);
  ::close(active);
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
  // Our flags first; everything else is Google Benchmark's.
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--csv=", 0) == 0) {
      csv_path = a.substr(6);
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
  return 0;
}
