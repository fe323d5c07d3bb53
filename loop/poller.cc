#include "loop/poller.h"

#include "loop/auto_poller.h"
#include "loop/epoll_poller.h"
#include "loop/ppoll_poller.h"

namespace minivmm::loop {

std::string_view poller_kind_name(PollerKind kind) noexcept {
  switch (kind) {
    case PollerKind::kPpoll: return "ppoll";
    case PollerKind::kEpoll: return "epoll";
    case PollerKind::kTimerfdEpoll: return "timerfd-epoll";
    case PollerKind::kAuto: return "auto";
  }
  return "?";
}

std::optional<PollerKind> parse_poller_kind(std::string_view name) noexcept {
  for (PollerKind k : {PollerKind::kPpoll, PollerKind::kEpoll, PollerKind::kTimerfdEpoll,
                       PollerKind::kAuto}) {
    if (poller_kind_name(k) == name) return k;
  }
  return std::nullopt;
}

std::unique_ptr<Poller> make_poller(PollerKind kind) {
  switch (kind) {
    case PollerKind::kPpoll: return std::make_unique<PpollPoller>();
    case PollerKind::kEpoll: return std::make_unique<EpollPoller>(false);
    case PollerKind::kTimerfdEpoll: return std::make_unique<EpollPoller>(true);
    case PollerKind::kAuto: return std::make_unique<AutoPoller>();
  }
  return nullptr;
}

}  // namespace minivmm::loop
