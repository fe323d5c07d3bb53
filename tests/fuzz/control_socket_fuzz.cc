// libFuzzer target: the control socket's request path end to end — JsonLineChannel's framing
// (newlines, CR, blank lines, the line limit), the JSON parser and ControlSocket's request
// checks and replies — over a real UNIX socket inside a real EventLoop. The input is what one
// client sends before it half-closes.
//
// Checked: every reply is one line of JSON, an object with a boolean "ok"; no more replies than
// lines (plus one for an overlong line); the server closes the connection after the client's
// end of file; no socket fd is left open afterwards; no exception leaves the event loop (issue
// 20: a number too big for a double did, and ended the VMM); and nothing crashes or trips
// ASan/UBSan.
#include <dirent.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "devices/log/log.h"
#include "loop/event_loop.h"
#include "timers/dynticks.h"
#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"
#include "timers/timer_list.h"
#include "vmm/control/control_socket.h"

namespace {

using nlohmann::json;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "control socket fuzz: %s\n", what.c_str());
  std::abort();
}

// Sockets only: libFuzzer and the sanitizers open pipes of their own (llvm-symbolizer) while
// it runs.
int open_sockets() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[64] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    if (readlink(link.c_str(), target, sizeof target - 1) > 0 &&
        std::strncmp(target, "socket:", 7) == 0) {
      ++n;
    }
  }
  closedir(d);
  return n;
}

struct Server {
  Server() {
    minivmm::log::set_level(minivmm::log::Level::off);
    path = "/tmp/minivmm-fuzz-api-" + std::to_string(getpid()) + ".sock";
    unlink(path.c_str());
    minivmm::vmm::ControlHandlers h;
    h.stats = [] { return json{{"loop", {{"iterations", 1}}}}; };
    h.pause = [this] {
      const bool changed = !paused;
      paused = true;
      return changed;
    };
    h.resume = [this] {
      const bool changed = paused;
      paused = false;
      return changed;
    };
    h.quit = [] {};
    socket = std::make_unique<minivmm::vmm::ControlSocket>(loop, rt_timers, path, h);
  }
  // EventLoop::run_once() lets a callback's exception through; in the VMM it reaches main()
  // and ends the run (exit 12), so here it is a finding, named, rather than libFuzzer's
  // "deadly signal" from std::terminate.
  void pump() {
    loop.schedule([] {});
    bool ok = false;
    try {
      ok = loop.run_once();
    } catch (const std::exception& e) {
      finding(std::string("an exception escaped the event loop: ") + e.what());
    } catch (...) {
      finding("an exception (not a std::exception) escaped the event loop");
    }
    if (!ok) finding("the loop failed");
  }

  std::string path;
  bool paused = false;
  minivmm::timers::MonotonicClock clock;
  // As in Machine: the idle sweep on an rt list that the loop's Dynticks runs.
  minivmm::timers::TimerList rt_timers{minivmm::timers::ClockType::kRt, clock};
  minivmm::timers::PollTimeoutAlarm alarm;
  minivmm::timers::Dynticks dynticks{alarm, clock, {&rt_timers}};
  minivmm::loop::EventLoop loop{minivmm::loop::make_poller(minivmm::loop::PollerKind::kEpoll),
                                dynticks};
  std::unique_ptr<minivmm::vmm::ControlSocket> socket;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Server server;
  static const int baseline_sockets = open_sockets();

  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, server.path.data(), server.path.size());
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    finding(std::string("connect: ") + std::strerror(errno));
  }
  std::size_t sent = 0;
  std::string in;
  bool eof = false;
  auto read_replies = [&] {
    char buf[4096];
    for (;;) {
      const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        in.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0 || errno == ECONNRESET) eof = true;
      return;
    }
  };
  bool shut = false;
  for (int turn = 0; turn < 10'000 && !eof; ++turn) {
    if (sent < size) {
      const ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN) sent = size;  // the server hung up (overlong line)
    }
    if (sent == size && !shut) {
      shutdown(fd, SHUT_WR);
      shut = true;
    }
    server.pump();
    read_replies();
  }
  close(fd);
  if (!eof) finding("the server did not close the connection after the client's end of file");

  std::size_t lines_in = 1;
  for (std::size_t i = 0; i < size; ++i) lines_in += data[i] == '\n';
  std::size_t replies = 0;
  for (std::size_t start = 0, nl; (nl = in.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    ++replies;
    const json r = json::parse(in.substr(start, nl - start), nullptr, false);
    if (r.is_discarded() || !r.is_object() || !r.contains("ok") || !r["ok"].is_boolean()) {
      finding("a reply that is not a JSON object with a boolean ok: " +
              in.substr(start, nl - start));
    }
  }
  if (!in.empty() && in.back() != '\n') finding("a reply without its newline");
  if (replies > lines_in + 1) finding("more replies than request lines");
  for (int i = 0; i < 100 && server.socket->clients() != 0; ++i) server.pump();
  if (server.socket->clients() != 0) finding("a closed client is still registered");
  if (open_sockets() != baseline_sockets) finding("a socket fd leaked");
  return 0;
}
