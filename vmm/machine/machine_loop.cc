#include "vmm/machine/machine_loop.h"

#include <string>
#include <system_error>
#include <vector>

#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

std::unique_ptr<timers::AlarmTimer> make_alarm(const Config& c) {
  if (c.periodic_alarm_hz <= 0 || c.periodic_alarm_hz > 100'000) {
    throw VmmError(ExitCode::kUsage, "--periodic-hz must be between 1 and 100000");
  }
  timers::AlarmOptions opts;
  opts.periodic_interval = timers::Nanos{1'000'000'000 / c.periodic_alarm_hz};
  try {
    return timers::make_alarm_timer(c.alarm, opts);
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("host alarm: ") + e.what());
  }
}

std::unique_ptr<loop::Poller> make_poller(const Config& c) {
  try {
    return loop::make_poller(c.poller);
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("poller: ") + e.what());
  }
}

}  // namespace

MachineLoop::MachineLoop(const Config& config)
    : alarm(make_alarm(config)),
      dynticks(std::make_unique<timers::Dynticks>(
          *alarm, mono, std::vector<timers::TimerList*>{&loop_vm_timers, &loop_rt_timers},
          timers::DynticksOptions{timers::Nanos{config.min_delta_ns}})),
      loop(std::make_unique<loop::EventLoop>(make_poller(config), *dynticks)) {}

}  // namespace minivmm::vmm
