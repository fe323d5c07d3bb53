#include "timers/alarm_timer.h"

#include "timers/poll_timeout_alarm.h"
#include "timers/posix_timer_alarm.h"
#include "timers/timerfd_alarm.h"

namespace minivmm::timers {

std::string_view alarm_kind_name(AlarmKind kind) noexcept {
  switch (kind) {
    case AlarmKind::kDynticks: return "dynticks";
    case AlarmKind::kTimerfd: return "timerfd";
    case AlarmKind::kPpoll: return "ppoll";
    case AlarmKind::kPeriodic: return "periodic";
  }
  return "?";
}

std::optional<AlarmKind> parse_alarm_kind(std::string_view name) noexcept {
  for (AlarmKind k : {AlarmKind::kDynticks, AlarmKind::kTimerfd, AlarmKind::kPpoll,
                      AlarmKind::kPeriodic}) {
    if (alarm_kind_name(k) == name) return k;
  }
  return std::nullopt;
}

std::unique_ptr<AlarmTimer> make_alarm_timer(AlarmKind kind, const AlarmOptions& options) {
  switch (kind) {
    case AlarmKind::kDynticks: return std::make_unique<PosixTimerAlarm>();
    case AlarmKind::kTimerfd: return std::make_unique<TimerfdAlarm>();
    case AlarmKind::kPpoll: return std::make_unique<PollTimeoutAlarm>();
    case AlarmKind::kPeriodic: return std::make_unique<TimerfdAlarm>(options.periodic_interval);
  }
  return nullptr;
}

}  // namespace minivmm::timers
