// ControlSocket against real client sockets, inside a real EventLoop (ppoll, no timers). Nothing
// sleeps: each pump schedules an empty bottom half, so a wait with nothing ready returns at once.
#include "vmm/control/control_socket.h"

#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "loop/event_loop.h"
#include "tests/support/fake_clock.h"
#include "tests/support/time_driver.h"
#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"
#include "timers/timer_list.h"
#include "tests/support/unix_socket.h"

namespace minivmm::vmm {
namespace {

using nlohmann::json;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/minivmm-ctl-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (d) path_ = d;
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int connect_to(const std::string& path) { return testing::unix_connect(path, SOCK_NONBLOCK); }

// A test client: non-blocking socket, bytes in, lines out.
struct Client {
  int fd = -1;
  std::string in;
  bool eof = false;

  explicit Client(const std::string& path) : fd(connect_to(path)) {}
  ~Client() {
    if (fd >= 0) close(fd);
  }
  void send_raw(const std::string& bytes) const {
    ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Reads what is there; true if a full line is buffered.
  void poll_input() {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        in.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0 || (n < 0 && errno == ECONNRESET)) eof = true;
      return;
    }
  }
  std::optional<std::string> take_line() {
    const auto nl = in.find('\n');
    if (nl == std::string::npos) return std::nullopt;
    std::string line = in.substr(0, nl);
    in.erase(0, nl + 1);
    return line;
  }
};

class ControlSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    path_ = dir_.path() + "/api.sock";
  }

  void start(ControlSocketOptions options = {}) {
    ControlHandlers h;
    h.stats = [this] {
      if (stats_throws_) throw std::runtime_error("no stats today");
      if (stats_throws_int_) throw 42;
      ++stats_calls_;
      if (stats_override_) return *stats_override_;
      return json{{"loop", {{"iterations", 42}}}, {"blob", stats_blob_}};
    };
    h.pause = [this] {
      const bool changed = !paused_;
      paused_ = true;
      return changed;
    };
    h.resume = [this] {
      const bool changed = paused_;
      paused_ = false;
      return changed;
    };
    h.wake = [this] {
      const bool changed = asleep_;
      asleep_ = false;
      return changed;
    };
    h.quit = [this] { ++quits_; };
    socket_ = std::make_unique<ControlSocket>(loop_, rt_timers_, path_, h, options);
  }

  void pump(int iterations = 1) {
    for (int i = 0; i < iterations; ++i) {
      loop_.schedule([] {});
      ASSERT_TRUE(loop_.run_once());
    }
  }

  // Pumps the loop until `c` has a full reply line; fails after a bounded number of turns.
  json reply(Client& c) {
    for (int i = 0; i < 100; ++i) {
      c.poll_input();
      if (auto line = c.take_line()) return json::parse(*line);
      if (c.eof) break;
      pump();
    }
    ADD_FAILURE() << "no reply";
    return json();
  }

  json request(Client& c, const std::string& line) {
    c.send_raw(line + "\n");
    return reply(c);
  }

  bool closed_by_server(Client& c) {
    for (int i = 0; i < 100 && !c.eof; ++i) {
      pump();
      c.poll_input();
    }
    return c.eof;
  }

  bool wait_for_clients(std::size_t n) {
    for (int i = 0; i < 100 && socket_->clients() != n; ++i) pump();
    return socket_->clients() == n;
  }

  TempDir dir_;
  std::string path_;
  timers::MonotonicClock clock_;
  timers::PollTimeoutAlarm alarm_;
  timers::Dynticks dynticks_{alarm_, clock_, {}};
  loop::EventLoop loop_{loop::make_poller(loop::PollerKind::kPpoll), dynticks_};
  // The idle sweep's list, on a fake clock outside the loop: tests move time with advance().
  testing::FakeClock rt_clock_;
  timers::TimerList rt_timers_{timers::ClockType::kRt, rt_clock_};
  std::unique_ptr<ControlSocket> socket_;

  bool paused_ = false;
  bool asleep_ = false;
  bool stats_throws_ = false;
  bool stats_throws_int_ = false;
  std::optional<json> stats_override_;
  std::string stats_blob_;
  int stats_calls_ = 0;
  int quits_ = 0;
};

TEST_F(ControlSocketTest, TheSocketFileIsASocketOnlyItsOwnerCanUse) {
  const mode_t old = umask(0);  // a permissive umask must not leak into the socket's mode
  start();
  umask(old);
  struct stat st {};
  ASSERT_EQ(lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
}

TEST_F(ControlSocketTest, StatsRepliesWithTheHandlersObjectAndEchoesTheId) {
  start();
  Client c(path_);
  ASSERT_GE(c.fd, 0);
  const json r = request(c, R"({"cmd":"stats","id":7})");
  EXPECT_EQ(r["ok"], true);
  EXPECT_EQ(r["id"], 7);
  EXPECT_EQ(r["stats"]["loop"]["iterations"], 42);
  EXPECT_EQ(stats_calls_, 1);
}

TEST_F(ControlSocketTest, PauseAndResumeSayWhetherTheyChangedAnything) {
  start();
  Client c(path_);
  json r = request(c, R"({"cmd":"pause"})");
  EXPECT_EQ(r, (json{{"ok", true}, {"state", "paused"}, {"changed", true}}));
  EXPECT_TRUE(paused_);
  r = request(c, R"({"cmd":"pause"})");
  EXPECT_EQ(r["changed"], false);
  r = request(c, R"({"cmd":"resume"})");
  EXPECT_EQ(r, (json{{"ok", true}, {"state", "running"}, {"changed", true}}));
  EXPECT_FALSE(paused_);
  r = request(c, R"({"cmd":"resume"})");
  EXPECT_EQ(r["changed"], false);
}

// ACPI S3's wake (docs/acpi-pm.md): running again when it woke a sleeping guest, no state
// claimed when there was nothing to wake.
TEST_F(ControlSocketTest, WakeSaysWhetherItWokeASleepingGuest) {
  start();
  Client c(path_);
  asleep_ = true;
  json r = request(c, R"({"cmd":"wake","id":3})");
  EXPECT_EQ(r, (json{{"ok", true}, {"id", 3}, {"state", "running"}, {"changed", true}}));
  EXPECT_FALSE(asleep_);
  r = request(c, R"({"cmd":"wake"})");
  EXPECT_EQ(r, (json{{"ok", true}, {"changed", false}}));
}

TEST_F(ControlSocketTest, QuitRepliesThenCallsTheHandler) {
  start();
  Client c(path_);
  c.send_raw("{\"cmd\":\"quit\"}\n");
  for (int i = 0; i < 10 && quits_ == 0; ++i) pump();  // accept, then read
  EXPECT_EQ(quits_, 1);
  c.poll_input();  // the reply was written before the handler ran: no more pumping needed
  const auto line = c.take_line();
  ASSERT_TRUE(line);
  EXPECT_EQ(json::parse(*line), (json{{"ok", true}}));
}

TEST_F(ControlSocketTest, BadJsonGetsAnErrorAndTheConnectionStaysOpen) {
  start();
  Client c(path_);
  json r = request(c, "{\"cmd\": stats}");
  EXPECT_EQ(r["ok"], false);
  EXPECT_EQ(r["error"].get<std::string>().rfind("bad JSON", 0), 0u) << r;
  // Invalid UTF-8 is a parse error too, and the error text that quotes it still serializes.
  r = request(c, "{\"cmd\":\"\xff\xfe\"}");
  EXPECT_EQ(r["ok"], false);
  r = request(c, R"({"cmd":"stats"})");
  EXPECT_EQ(r["ok"], true);
  EXPECT_EQ(socket_->stats().errors, 2u);
}

TEST_F(ControlSocketTest, RequestsMustBeObjectsWithAStringCmd) {
  start();
  Client c(path_);
  for (const char* bad : {"[1,2]", "42", "\"stats\"", "null"}) {
    const json r = request(c, bad);
    EXPECT_EQ(r["ok"], false) << bad;
    EXPECT_EQ(r["error"], "a request must be a JSON object") << bad;
  }
  for (const char* bad : {R"({})", R"({"cmd":5})", R"({"command":"stats","id":"x"})"}) {
    const json r = request(c, bad);
    EXPECT_EQ(r["ok"], false) << bad;
    EXPECT_EQ(r["error"], "missing \"cmd\" (a string)") << bad;
  }
  EXPECT_EQ(request(c, R"({"command":"stats","id":"x"})")["id"], "x");
}

TEST_F(ControlSocketTest, AnUnknownCommandGetsAnError) {
  start();
  Client c(path_);
  const json r = request(c, R"({"cmd":"reboot","id":[1]})");
  EXPECT_EQ(r, (json{{"ok", false}, {"error", "unknown cmd \"reboot\""}, {"id", {1}}}));
  EXPECT_EQ(request(c, R"({"cmd":"stats"})")["ok"], true);
}

TEST_F(ControlSocketTest, AHandlerThatThrowsGetsAnErrorReply) {
  start();
  stats_throws_ = true;
  Client c(path_);
  const json r = request(c, R"({"cmd":"stats"})");
  EXPECT_EQ(r, (json{{"ok", false}, {"error", "stats failed: no stats today"}}));
  stats_throws_ = false;
  EXPECT_EQ(request(c, R"({"cmd":"stats"})")["ok"], true);
}

// on_message caught std::exception only: anything else a handler threw crossed the event loop.
TEST_F(ControlSocketTest, AHandlerThatThrowsSomethingElseStillGetsAnErrorReply) {
  start();
  stats_throws_int_ = true;
  Client c(path_);
  const json r = request(c, R"({"cmd":"stats","id":3})");
  EXPECT_EQ(r, (json{{"ok", false}, {"error", "stats failed: unknown exception"}, {"id", 3}}));
  stats_throws_int_ = false;
  EXPECT_EQ(request(c, R"({"cmd":"stats"})")["ok"], true);
  EXPECT_EQ(socket_->clients(), 1u);
}

// What a handler returns is dumped without throwing: invalid UTF-8 is replaced, and numbers JSON
// cannot say (NaN, infinities) become null.
TEST_F(ControlSocketTest, AReplyOfValuesJsonCannotSayIsStillOneLineOfJson) {
  start();
  stats_override_ = json{{"nan", std::nan("")},
                         {"inf", -std::numeric_limits<double>::infinity()},
                         {"bytes", "\xff\xfe"},
                         {"\xc3", 1}};
  Client c(path_);
  const json r = request(c, R"({"cmd":"stats"})");
  EXPECT_EQ(r["ok"], true);
  EXPECT_TRUE(r["stats"]["nan"].is_null());
  EXPECT_TRUE(r["stats"]["inf"].is_null());
  EXPECT_EQ(r["stats"]["bytes"], "\ufffd\ufffd");
  EXPECT_EQ(request(c, R"({"cmd":"pause"})")["ok"], true);
}

TEST_F(ControlSocketTest, CrlfAndBlankLinesAreAccepted) {
  start();
  Client c(path_);
  c.send_raw("\n  \r\n{\"cmd\":\"pause\"}\r\n");
  EXPECT_EQ(reply(c)["ok"], true);
  EXPECT_TRUE(paused_);
}

TEST_F(ControlSocketTest, PipelinedRequestsAreAnsweredInOrder) {
  start();
  Client c(path_);
  c.send_raw(R"({"cmd":"pause","id":1})" "\n" R"({"cmd":"stats","id":2})" "\n"
             R"({"cmd":"resume","id":3})" "\n");
  EXPECT_EQ(reply(c)["id"], 1);
  EXPECT_EQ(reply(c)["id"], 2);
  EXPECT_EQ(reply(c)["id"], 3);
  EXPECT_FALSE(paused_);
}

TEST_F(ControlSocketTest, AnOversizedLineGetsAnErrorAndTheConnectionIsClosed) {
  start();
  Client c(path_);
  c.send_raw(std::string(5000, 'a'));  // no newline at all
  const json r = reply(c);
  EXPECT_EQ(r["ok"], false);
  EXPECT_EQ(r["error"], "request longer than 4096 bytes; closing");
  EXPECT_TRUE(closed_by_server(c));
  EXPECT_TRUE(wait_for_clients(0));
  EXPECT_EQ(socket_->stats().dropped, 1u);

  Client d(path_);  // the VMM keeps serving
  // This one ends, but too late.
  d.send_raw("{\"cmd\":\"stats\",\"pad\":\"" + std::string(4500, ' ') + "\"}\n");
  EXPECT_EQ(reply(d)["ok"], false);
  EXPECT_TRUE(closed_by_server(d));
}

TEST_F(ControlSocketTest, ALineJustUnderTheLimitIsServed) {
  start();
  Client c(path_);
  const std::string head = R"({"cmd":"stats","pad":")";
  const std::string line = head + std::string(4096 - head.size() - 2, 'x') + "\"}";
  ASSERT_EQ(line.size(), 4096u);
  EXPECT_EQ(request(c, line)["ok"], true);
}

TEST_F(ControlSocketTest, AClientThatDisconnectsMidLineIsCleanedUp) {
  start();
  {
    Client c(path_);
    ASSERT_TRUE(wait_for_clients(1));
    c.send_raw(R"({"cmd":"sta)");
    pump(2);
  }  // closed mid-line
  EXPECT_TRUE(wait_for_clients(0));
  EXPECT_EQ(stats_calls_, 0);
  Client d(path_);
  EXPECT_EQ(request(d, R"({"cmd":"stats"})")["ok"], true);
}

TEST_F(ControlSocketTest, AClientThatHalfClosesStillGetsItsReplies) {
  start();
  Client c(path_);
  c.send_raw("{\"cmd\":\"pause\"}\n{\"cmd\":\"stats\"}\n");
  ASSERT_EQ(shutdown(c.fd, SHUT_WR), 0);
  EXPECT_EQ(reply(c)["state"], "paused");
  EXPECT_EQ(reply(c)["ok"], true);
  EXPECT_TRUE(closed_by_server(c));
  EXPECT_TRUE(wait_for_clients(0));
}

TEST_F(ControlSocketTest, TwoClientsInterleavedEachGetTheirOwnReplies) {
  start();
  Client a(path_);
  Client b(path_);
  ASSERT_TRUE(wait_for_clients(2));
  a.send_raw(R"({"cmd":"pause",)");
  pump(2);
  b.send_raw("{\"cmd\":\"stats\",\"id\":\"b\"}\n");
  const json rb = reply(b);
  EXPECT_EQ(rb["id"], "b");
  EXPECT_EQ(rb["ok"], true);
  EXPECT_FALSE(paused_);  // a's request is still incomplete
  a.send_raw("\"id\":\"a\"}\n");
  const json ra = reply(a);
  EXPECT_EQ(ra["id"], "a");
  EXPECT_EQ(ra["state"], "paused");
  a.poll_input();
  b.poll_input();
  EXPECT_TRUE(a.in.empty());  // nothing crossed over
  EXPECT_TRUE(b.in.empty());
}

TEST_F(ControlSocketTest, ClientsBeyondTheCapAreRefused) {
  ControlSocketOptions o;
  o.max_clients = 2;
  start(o);
  Client a(path_);
  Client b(path_);
  ASSERT_TRUE(wait_for_clients(2));
  Client c(path_);
  const json r = reply(c);
  EXPECT_EQ(r, (json{{"ok", false}, {"error", "too many clients"}}));
  EXPECT_TRUE(closed_by_server(c));
  EXPECT_EQ(socket_->stats().refused, 1u);
  EXPECT_EQ(request(a, R"({"cmd":"stats"})")["ok"], true);
}

// Issue 20: with no idle timeout, 16 connections that never sent a byte locked every other
// client out for as long as they stayed open.
TEST_F(ControlSocketTest, AnIdleClientIsClosedAfterTheTimeoutAndABusyOneIsNot) {
  using namespace std::chrono_literals;
  start();  // the default: 30 s
  Client idle(path_);
  Client busy(path_);
  ASSERT_TRUE(wait_for_clients(2));
  EXPECT_EQ(testing::advance(rt_clock_, rt_timers_, 29s), 9u);  // a sweep every 3 s
  pump();
  idle.poll_input();
  EXPECT_FALSE(idle.eof);
  EXPECT_TRUE(idle.in.empty());
  EXPECT_EQ(request(busy, R"({"cmd":"stats"})")["ok"], true);  // at 29 s

  // The idle one goes between 30 and 33 s after it connected, with one error line.
  testing::advance(rt_clock_, rt_timers_, 4s);
  EXPECT_EQ(reply(idle), (json{{"ok", false}, {"error", "idle for 30 s; closing"}}));
  EXPECT_TRUE(closed_by_server(idle));
  EXPECT_TRUE(wait_for_clients(1));

  // The busy one's clock restarted with its request; a bad line counts as a request too.
  testing::advance(rt_clock_, rt_timers_, 20s);  // 49 s
  EXPECT_EQ(request(busy, "nonsense")["ok"], false);
  testing::advance(rt_clock_, rt_timers_, 29s);  // 78 s
  busy.poll_input();
  EXPECT_FALSE(busy.eof);
  testing::advance(rt_clock_, rt_timers_, 4s);  // 82 s
  EXPECT_EQ(reply(busy)["error"], "idle for 30 s; closing");
  EXPECT_TRUE(closed_by_server(busy));
  EXPECT_TRUE(wait_for_clients(0));
  EXPECT_EQ(socket_->stats().idle_closed, 2u);

  // With nobody connected the sweep stops; the next client starts it again.
  testing::advance(rt_clock_, rt_timers_, 3s);
  EXPECT_EQ(testing::advance(rt_clock_, rt_timers_, 1h), 0u);
  Client late(path_);
  ASSERT_TRUE(wait_for_clients(1));
  EXPECT_EQ(testing::advance(rt_clock_, rt_timers_, 3s), 1u);
}

// A partial line is not a request: a client that trickles bytes without a newline is idle.
TEST_F(ControlSocketTest, APartialLineDoesNotKeepAClientAlive) {
  using namespace std::chrono_literals;
  start();
  Client slow(path_);
  ASSERT_TRUE(wait_for_clients(1));
  for (int i = 0; i < 10; ++i) {  // 30 s by the clock since its connect: the sweep at 30 s
    slow.send_raw("{");
    pump();
    testing::advance(rt_clock_, rt_timers_, 3s);
  }
  EXPECT_EQ(reply(slow)["error"], "idle for 30 s; closing");
  EXPECT_TRUE(closed_by_server(slow));
}

TEST_F(ControlSocketTest, AZeroIdleTimeoutNeverClosesAndNeverSweeps) {
  using namespace std::chrono_literals;
  ControlSocketOptions o;
  o.idle_timeout = timers::Nanos{0};
  start(o);
  Client c(path_);
  ASSERT_TRUE(wait_for_clients(1));
  EXPECT_EQ(testing::advance(rt_clock_, rt_timers_, 24h), 0u);
  EXPECT_EQ(request(c, R"({"cmd":"stats"})")["ok"], true);
}

TEST_F(ControlSocketTest, ANewClientEvictsTheLongestIdleWhenTheTableIsFull) {
  using namespace std::chrono_literals;
  ControlSocketOptions o;
  o.max_clients = 3;
  start(o);
  Client a(path_);
  Client b(path_);
  Client c(path_);
  ASSERT_TRUE(wait_for_clients(3));
  EXPECT_EQ(request(a, R"({"cmd":"stats"})")["ok"], true);  // b is now the longest idle
  c.send_raw(R"({"cmd":)");                                 // c is mid-request
  pump();
  testing::advance(rt_clock_, rt_timers_, 6s);  // two sweeps: all three idle for long enough

  Client d(path_);
  EXPECT_EQ(reply(b),
            (json{{"ok", false}, {"error", "idle while the client table was full; closing"}}));
  EXPECT_TRUE(closed_by_server(b));
  EXPECT_EQ(request(d, R"({"cmd":"stats"})")["ok"], true);
  EXPECT_EQ(request(a, R"({"cmd":"stats"})")["ok"], true);
  c.send_raw(R"("stats"})" "\n");
  EXPECT_EQ(reply(c)["ok"], true);
  EXPECT_EQ(socket_->stats().evicted, 1u);
  EXPECT_EQ(socket_->stats().refused, 0u);
  EXPECT_EQ(socket_->clients(), 3u);
}

TEST_F(ControlSocketTest, ANewClientIsRefusedWhenNobodyMayBeEvicted) {
  using namespace std::chrono_literals;
  ControlSocketOptions o;
  o.max_clients = 2;
  start(o);
  Client a(path_);
  Client b(path_);
  ASSERT_TRUE(wait_for_clients(2));
  // Idle, but only just (under the 3 s of a tenth of the timeout): a burst of connects must
  // not evict its own members.
  testing::advance(rt_clock_, rt_timers_, 2900ms);
  Client c(path_);
  EXPECT_EQ(reply(c), (json{{"ok", false}, {"error", "too many clients"}}));
  EXPECT_TRUE(closed_by_server(c));

  // Long idle, but with a request half sent: not evicted either.
  a.send_raw(R"({"cmd":"st)");
  b.send_raw(R"({"cmd":"st)");
  pump();
  testing::advance(rt_clock_, rt_timers_, 20s);
  Client d(path_);
  EXPECT_EQ(reply(d)["error"], "too many clients");
  EXPECT_EQ(socket_->stats().refused, 2u);
  EXPECT_EQ(socket_->stats().evicted, 0u);
  a.send_raw(R"(ats"})" "\n");
  EXPECT_EQ(reply(a)["ok"], true);
}

// Issue 31: README says a newcomer evicts the client idle longest if it has been idle 3 s or
// more. Idleness was counted in 3 s sweeps, so at 3.1 s (one sweep) the newcomer was refused;
// it is by the clock now, at the moment the newcomer is accepted.
TEST_F(ControlSocketTest, EvictionIsByTheClockWhenTheNewcomerArrives) {
  using namespace std::chrono_literals;
  ControlSocketOptions o;
  o.max_clients = 2;
  start(o);
  Client a(path_);
  Client b(path_);
  ASSERT_TRUE(wait_for_clients(2));
  testing::advance(rt_clock_, rt_timers_, 2900ms);
  Client early(path_);
  EXPECT_EQ(reply(early), (json{{"ok", false}, {"error", "too many clients"}})) << "at 2.9 s";
  EXPECT_TRUE(closed_by_server(early));
  EXPECT_EQ(socket_->stats().evicted, 0u);

  testing::advance(rt_clock_, rt_timers_, 200ms);  // 3.1 s
  Client late(path_);
  EXPECT_EQ(reply(a),
            (json{{"ok", false}, {"error", "idle while the client table was full; closing"}}))
      << "at 3.1 s the longest idle goes (a and b since 0 s: a came first)";
  EXPECT_TRUE(closed_by_server(a));
  EXPECT_EQ(request(late, R"({"cmd":"stats"})")["ok"], true);
  EXPECT_EQ(socket_->stats().evicted, 1u);
  EXPECT_EQ(socket_->stats().refused, 1u);
}

// Whatever the sweep's phase: a client that came 2 s after the sweeps started is evictable 3 s
// later, not at the next sweep but one.
TEST_F(ControlSocketTest, EvictionDoesNotWaitForTheSweepsPhase) {
  using namespace std::chrono_literals;
  ControlSocketOptions o;
  o.max_clients = 2;
  start(o);
  Client a(path_);
  ASSERT_TRUE(wait_for_clients(1));  // the sweeps start: at 3 s, 6 s, ...
  testing::advance(rt_clock_, rt_timers_, 2s);
  Client b(path_);
  ASSERT_TRUE(wait_for_clients(2));
  testing::advance(rt_clock_, rt_timers_, 3100ms);  // 5.1 s: a idle 5.1 s, b 3.1 s
  Client c(path_);
  EXPECT_EQ(reply(a)["error"], "idle while the client table was full; closing");
  EXPECT_EQ(request(c, R"({"cmd":"stats"})")["ok"], true);
  Client d(path_);  // b has been idle 3.1 s, c not at all: b goes
  EXPECT_EQ(reply(b)["error"], "idle while the client table was full; closing");
  EXPECT_EQ(request(d, R"({"cmd":"stats"})")["ok"], true);
  Client e(path_);  // c and d are fresh
  EXPECT_EQ(reply(e)["error"], "too many clients");
  EXPECT_EQ(socket_->stats().evicted, 2u);
}

// Issue 31: the listen backlog was max_clients (16), and a UNIX socket's non-blocking connect
// past it fails with EAGAIN: with more than 16 connects in flight before the loop's next turn,
// the rest failed instead of being accepted and served or refused with a reply.
TEST_F(ControlSocketTest, ConnectsInFlightPastTheClientLimitAreAcceptedAndAnswered) {
  start();  // 16 clients
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 64; ++i) {  // no pump in between: all in the backlog at once
    clients.push_back(std::make_unique<Client>(path_));
    ASSERT_GE(clients.back()->fd, 0) << "connect " << i << ": " << std::strerror(errno);
  }
  int served = 0, refused = 0;
  for (auto& c : clients) {
    const std::string req = "{\"cmd\":\"stats\"}\n";
    [[maybe_unused]] const ssize_t n = ::send(c->fd, req.data(), req.size(), MSG_NOSIGNAL);
    const json r = reply(*c);
    if (r.value("ok", false)) {
      ++served;
    } else {
      EXPECT_EQ(r["error"], "too many clients");
      ++refused;
    }
  }
  EXPECT_EQ(served, 16);
  EXPECT_EQ(refused, 48);
}

TEST_F(ControlSocketTest, AClientThatDoesNotReadItsRepliesIsDropped) {
  ControlSocketOptions o;
  o.limits.max_output = 64 * 1024;
  start(o);
  stats_blob_ = std::string(16 * 1024, 'z');
  Client greedy(path_);
  Client polite(path_);
  ASSERT_TRUE(wait_for_clients(2));
  std::string burst;
  for (int i = 0; i < 100; ++i) burst += "{\"cmd\":\"stats\"}\n";  // 1.6 MiB of replies
  greedy.send_raw(burst);
  EXPECT_TRUE(wait_for_clients(1));
  EXPECT_EQ(socket_->stats().dropped, 1u);
  EXPECT_EQ(request(polite, R"({"cmd":"pause"})")["ok"], true);
}

// Issue 20: one readable event handled all of the 64 KiB a client had sent, 2000 stats replies
// built in one go while the other clients, the timers and the guest's ticks waited.
TEST_F(ControlSocketTest, AFloodingClientDoesNotStarveAnother) {
  start();
  Client flood(path_);
  Client quiet(path_);
  ASSERT_TRUE(wait_for_clients(2));
  std::string burst;
  for (int i = 0; i < 2000; ++i) burst += "{\"cmd\":\"stats\"}\n";
  flood.send_raw(burst);
  quiet.send_raw("{\"cmd\":\"pause\",\"id\":\"q\"}\n");
  pump();
  quiet.poll_input();
  const auto line = quiet.take_line();
  ASSERT_TRUE(line) << "the quiet client waited";
  EXPECT_EQ(json::parse(*line)["id"], "q");
  EXPECT_LE(stats_calls_, 8) << "one iteration handled more than a turn's worth of the flood";

  // The whole flood is answered all the same, at most a turn's worth per iteration.
  int answered = 0;
  for (int i = 0; i < 1000 && answered < 2000; ++i) {
    const int calls = stats_calls_;
    pump();
    EXPECT_LE(stats_calls_ - calls, 8);
    flood.poll_input();
    while (flood.take_line()) ++answered;
  }
  EXPECT_EQ(answered, 2000);
  // Most turns left read lines for a bottom half; the others left the rest in the socket.
  EXPECT_GT(socket_->stats().deferred, 2000u / 8 / 2);
  EXPECT_EQ(socket_->clients(), 2u);
}

TEST_F(ControlSocketTest, AStaleSocketFileIsReplacedAndTheDestructorUnlinks) {
  {
    // A socket file nobody listens on: what a VMM that was killed leaves behind.
    const int fd = testing::unix_bind(path_, 0);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    close(fd);
  }
  start();
  Client c(path_);
  EXPECT_EQ(request(c, R"({"cmd":"stats"})")["ok"], true);
  socket_.reset();
  struct stat st {};
  EXPECT_NE(lstat(path_.c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(ControlSocketTest, RefusesALiveSocketAFileAndAPathTooLong) {
  start();
  const ControlHandlers none;
  EXPECT_THROW(ControlSocket(loop_, rt_timers_, path_, none), std::invalid_argument);  // live

  const std::string file = dir_.path() + "/plain";
  close(open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  EXPECT_THROW(ControlSocket(loop_, rt_timers_, file, none), std::invalid_argument);
  struct stat st {};
  EXPECT_EQ(lstat(file.c_str(), &st), 0);  // left alone

  EXPECT_THROW(ControlSocket(loop_, rt_timers_, dir_.path() + "/" + std::string(120, 'x'), none),
               std::invalid_argument);
  EXPECT_THROW(ControlSocket(loop_, rt_timers_, "", none), std::invalid_argument);
  EXPECT_THROW(ControlSocket(loop_, rt_timers_, dir_.path() + "/no/such/dir/api.sock", none),
               std::system_error);
}

TEST_F(ControlSocketTest, RefusesATimerListOfAnotherClock) {
  timers::TimerList vm_timers{timers::ClockType::kVm, rt_clock_};
  EXPECT_THROW(ControlSocket(loop_, vm_timers, path_, ControlHandlers{}), std::invalid_argument);
  struct stat st {};
  EXPECT_NE(lstat(path_.c_str(), &st), 0);  // judged before anything was created
}

TEST_F(ControlSocketTest, CommandsWithoutAHandlerAreUnknown) {
  socket_ = std::make_unique<ControlSocket>(loop_, rt_timers_, path_, ControlHandlers{});
  Client c(path_);
  EXPECT_EQ(request(c, R"({"cmd":"quit"})")["error"], "unknown cmd \"quit\"");
}

TEST_F(ControlSocketTest, StatsJsonCountsWhatHappened) {
  start();
  Client c(path_);
  request(c, R"({"cmd":"stats"})");
  request(c, "nope");
  const json s = socket_->stats_json();
  EXPECT_EQ(s["clients"], 1);
  EXPECT_EQ(s["accepted"], 1);
  EXPECT_EQ(s["requests"], 2);
  EXPECT_EQ(s["errors"], 1);
  // Keys are only ever added: the report's readers may rely on every one of them.
  for (const char* key : {"clients", "accepted", "refused", "requests", "errors", "dropped",
                          "internal_errors", "deferred", "idle_closed", "evicted"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  EXPECT_EQ(s["idle_closed"], 0);
  EXPECT_EQ(s["evicted"], 0);
  EXPECT_EQ(s["deferred"], 0);
  EXPECT_EQ(s["internal_errors"], 0);
}

// ---------------------------------------------------------------------------------------------
// Abuse: what a buggy or hostile local client can send. Each gets an error reply or is dropped,
// the socket keeps serving, and nothing leaks an fd.

int open_fds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// Every reply line must be JSON (the reply path must survive any input, e.g. a parser error that
// quotes invalid UTF-8 back), and an error one.
void expect_error_reply(const json& r, const std::string& what) {
  EXPECT_TRUE(r.is_object()) << what;
  if (r.is_object()) {
    EXPECT_EQ(r.value("ok", true), false) << what << ": " << r.dump();
  }
}

TEST_F(ControlSocketTest, GarbageLinesEachGetAnErrorAndServingGoesOn) {
  start();
  Client c(path_);
  std::uint32_t x = 12345;  // xorshift: the same garbage every run
  for (int i = 0; i < 200; ++i) {
    std::string line;
    const int len = 1 + static_cast<int>(x % 300);
    for (int j = 0; j < len; ++j) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      char ch = static_cast<char>(x & 0xff);
      if (ch == '\n') ch = '?';
      line += ch;
    }
    // A line that is all blanks (or blanks and a final '\r') gets no reply; make sure it has
    // something to parse.
    line = "#" + line;
    c.send_raw(line + "\n");
    expect_error_reply(reply(c), "garbage line " + std::to_string(i));
  }
  EXPECT_EQ(request(c, R"({"cmd":"stats"})")["ok"], true);
}

TEST_F(ControlSocketTest, NulsAndInvalidUtf8GetErrorRepliesThatAreValidJson) {
  start();
  Client c(path_);
  const std::vector<std::string> lines = {
      std::string("{\"cmd\":\"stats\"}\0", 16),           // a NUL after the object
      std::string("\0\0\0\0", 4),                           // only NULs
      std::string("{\"cmd\":\"st\0ats\"}", 16),             // a raw NUL inside a string
      "{\"cmd\":\"\\u0000\"}",                              // an escaped NUL: valid JSON
      "{\"cmd\":\"\xff\xfe\"}",                             // invalid UTF-8 in a string
      "\xff\xfe\xfd",                                       // invalid UTF-8 outside
      "{\"cmd\":\"stats\",\"id\":\"\xc3\"}",                // a truncated sequence in the id
      "{\"cmd\":\"\xed\xa0\x80\"}",                         // an encoded surrogate
      "{\"cmd\":\"\\ud800\"}",                              // an escaped lone surrogate
      "\xef\xbb\xbf{\"cmd\":\"nope\"}",                     // a BOM, then an unknown command
  };
  for (const std::string& line : lines) {
    c.send_raw(line + "\n");
    const json r = reply(c);
    expect_error_reply(r, "binary line");
  }
  EXPECT_EQ(request(c, R"({"cmd":"stats"})")["ok"], true);
  Client d(path_);  // and new clients are served
  EXPECT_EQ(request(d, R"({"cmd":"stats"})")["ok"], true);
}

// Issue 20: nlohmann::json reports a number it cannot hold as out_of_range, not parse_error;
// uncaught, it crossed the event loop and ended the VMM (exit 12) on one request.
TEST_F(ControlSocketTest, NumbersTooBigForADoubleGetAnErrorAndTheConnectionStaysUsable) {
  start();
  Client c(path_);
  const std::string digits(400, '9');
  for (const std::string& line :
       {std::string("[1e309]"), std::string("-1e309"), std::string(R"({"cmd":1e400})"),
        std::string(R"({"cmd":"stats","id":1e309})"), digits, "-" + digits,
        "{\"cmd\":\"stats\",\"id\":" + digits + "}"}) {
    const json r = request(c, line);
    expect_error_reply(r, line.substr(0, 40));
    EXPECT_NE(r.value("error", "").find("number overflow"), std::string::npos) << r.dump();
  }
  EXPECT_EQ(request(c, R"({"cmd":"stats"})")["ok"], true);
  EXPECT_EQ(socket_->clients(), 1u);
}

// Numbers at the edges of what JSON and a double can say: valid ones are served (the id comes
// back as the parser read it), invalid ones are parse errors. None ends the connection.
TEST_F(ControlSocketTest, NumberEdgeCasesAreServedOrRefusedOnTheSameConnection) {
  start();
  Client c(path_);
  struct Case {
    std::string id;
    bool ok;
  };
  const Case cases[] = {
      {"-0", true},
      {"-0.0", true},
      {"1e-400", true},  // underflows to 0
      {"4.9e-325", true},
      {"1.7976931348623157e308", true},
      {"18446744073709551615", true},   // the largest unsigned
      {"18446744073709551616", true},   // one more: read as a double
      {"-9223372036854775808", true},   // the smallest signed
      {"-9223372036854775809", true},   // one less: a double
      {"0x10", false},
      {"01", false},
      {"+1", false},
      {".5", false},
      {"1.", false},
      {"1e", false},
      {"NaN", false},
      {"Infinity", false},
      {"-", false},
  };
  for (const Case& k : cases) {
    const json r = request(c, "{\"cmd\":\"stats\",\"id\":" + k.id + "}");
    ASSERT_TRUE(r.is_object()) << k.id;
    EXPECT_EQ(r.value("ok", !k.ok), k.ok) << k.id << ": " << r.dump();
    if (k.ok) {
      EXPECT_EQ(r["id"], json::parse(k.id)) << k.id;
    }
  }
  EXPECT_EQ(request(c, R"({"cmd":"stats"})")["ok"], true);
}

// The parser is iterative, but copying a value (the id into the reply) and dumping it recurse
// once per level: a 4 KiB line nests 2000 levels deep, which overflowed an 8 MiB stack in the
// ASan build. Nesting is capped before the parse; the cap, not the line limit, bounds the stack.
TEST_F(ControlSocketTest, DeeplyNestedRequestsAreRefusedBeforeTheParse) {
  start();
  Client c(path_);
  const std::size_t depth = 2000;
  for (const std::string& line :
       {"{\"cmd\":\"stats\",\"id\":" + std::string(depth, '[') + std::string(depth, ']') + "}",
        std::string(4096, '['),  // never closed
        std::string(2048, '{'), "{\"cmd\":\"stats\",\"id\":" + std::string(65, '[')}) {
    const json r = request(c, line);
    expect_error_reply(r, line.substr(0, 30));
    EXPECT_EQ(r.value("error", ""), "bad JSON: nested deeper than 64 levels") << r.dump();
  }
  // Brackets inside strings are text, not nesting.
  const std::string brackets(3000, '[');
  json r = request(c, "{\"cmd\":\"stats\",\"id\":\"" + brackets + "\"}");
  EXPECT_EQ(r["ok"], true);
  EXPECT_EQ(r["id"], brackets);
  // 64 levels (the request object and 63 arrays) are fine.
  r = request(c, "{\"cmd\":\"stats\",\"id\":" + std::string(63, '[') + std::string(63, ']') + "}");
  EXPECT_EQ(r["ok"], true) << r.dump();
  EXPECT_EQ(request(c, R"({"cmd":"stats"})")["ok"], true);
}

TEST_F(ControlSocketTest, AOneMebibyteLineIsRefusedWithoutReadingItAll) {
  start();
  const int fds = open_fds();
  {
    Client c(path_);
    const std::string big(1 << 20, 'a');
    std::size_t sent = 0;
    // Non-blocking: send what the socket takes, let the server read, until it hangs up.
    for (int i = 0; i < 1000 && sent < big.size() && !c.eof; ++i) {
      const ssize_t n = ::send(c.fd, big.data() + sent, big.size() - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<std::size_t>(n);
      pump();
      c.poll_input();
    }
    EXPECT_LT(sent, big.size()) << "the server read a whole 1 MiB line";
    const auto line = c.take_line();
    ASSERT_TRUE(line.has_value());
    expect_error_reply(json::parse(*line), "1 MiB line");
    EXPECT_TRUE(closed_by_server(c));
  }
  EXPECT_TRUE(wait_for_clients(0));
  EXPECT_EQ(socket_->stats().dropped, 1u);
  EXPECT_EQ(open_fds(), fds);
  Client d(path_);
  EXPECT_EQ(request(d, R"({"cmd":"stats"})")["ok"], true);
}

TEST_F(ControlSocketTest, ManyHalfLinesThenHangUpsLeaveNothingBehind) {
  start();
  const int fds = open_fds();
  for (int round = 0; round < 5; ++round) {
    std::vector<std::unique_ptr<Client>> clients;
    for (int i = 0; i < 10; ++i) {
      clients.push_back(std::make_unique<Client>(path_));
      ASSERT_GE(clients.back()->fd, 0);
    }
    ASSERT_TRUE(wait_for_clients(10));
    for (auto& c : clients) c->send_raw(R"({"cmd":"pause","id":)");
    pump(3);
    clients.clear();  // all hang up mid-line
    ASSERT_TRUE(wait_for_clients(0));
  }
  EXPECT_FALSE(paused_);  // no half request ran
  EXPECT_EQ(open_fds(), fds);
  Client d(path_);
  EXPECT_EQ(request(d, R"({"cmd":"stats"})")["ok"], true);
}

// Connects, pumping the loop while the listen backlog is full (a non-blocking connect to a
// UNIX socket fails with EAGAIN then).
std::unique_ptr<Client> connect_pumping(const std::string& path,
                                        const std::function<void()>& pump) {
  for (int i = 0; i < 100; ++i) {
    auto c = std::make_unique<Client>(path);
    if (c->fd >= 0) return c;
    pump();
  }
  return nullptr;
}

TEST_F(ControlSocketTest, AHundredClientsAtOnceAreServedOrRefusedCleanly) {
  start();  // the default cap: 16 clients
  const int fds = open_fds();
  {
    std::vector<std::unique_ptr<Client>> clients;
    for (int i = 0; i < 100; ++i) {
      clients.push_back(connect_pumping(path_, [this] { pump(); }));
      ASSERT_NE(clients.back(), nullptr) << "client " << i << " could not connect";
    }
    int served = 0;
    int refused = 0;
    for (auto& c : clients) {
      // A refused client may already be closed by the server: its send can fail (EPIPE).
      const std::string req = "{\"cmd\":\"stats\"}\n";
      [[maybe_unused]] const ssize_t n = ::send(c->fd, req.data(), req.size(), MSG_NOSIGNAL);
      const json r = reply(*c);
      if (r.value("ok", false)) {
        ++served;
      } else {
        EXPECT_EQ(r, (json{{"ok", false}, {"error", "too many clients"}}));
        EXPECT_TRUE(closed_by_server(*c));
        ++refused;
      }
    }
    EXPECT_EQ(served, 16);
    EXPECT_EQ(refused, 84);
    EXPECT_EQ(socket_->stats().refused, 84u);
  }
  EXPECT_TRUE(wait_for_clients(0));
  EXPECT_EQ(open_fds(), fds);
}

TEST_F(ControlSocketTest, AHundredClientsAtOnceUnderAHigherCapAreAllServed) {
  ControlSocketOptions o;
  o.max_clients = 128;
  start(o);
  const int fds = open_fds();
  {
    std::vector<std::unique_ptr<Client>> clients;
    for (int i = 0; i < 100; ++i) {
      clients.push_back(connect_pumping(path_, [this] { pump(); }));
      ASSERT_NE(clients.back(), nullptr);
    }
    // All requests in flight before any reply is read.
    for (std::size_t i = 0; i < clients.size(); ++i) {
      clients[i]->send_raw("{\"cmd\":\"stats\",\"id\":" + std::to_string(i) + "}\n");
    }
    for (std::size_t i = 0; i < clients.size(); ++i) {
      const json r = reply(*clients[i]);
      EXPECT_EQ(r["ok"], true);
      EXPECT_EQ(r["id"], i);
    }
    EXPECT_EQ(socket_->clients(), 100u);
  }
  EXPECT_TRUE(wait_for_clients(0));
  EXPECT_EQ(open_fds(), fds);
  EXPECT_EQ(stats_calls_, 100);
}

}  // namespace
}  // namespace minivmm::vmm
