// JsonLineChannel over a socketpair inside a real EventLoop (ppoll, no timers). Nothing sleeps:
// each turn schedules an empty bottom half, so a wait with nothing ready returns at once.
#include "loop/json_line_channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"

namespace minivmm::loop {
namespace {

using nlohmann::json;

class JsonLineChannelTest : public ::testing::Test {
 protected:
  // A channel on one end of a fresh socketpair; the test writes to and reads from the other.
  struct Peer {
    int fd = -1;
    std::unique_ptr<JsonLineChannel> channel;
    std::vector<json> messages;
    std::vector<std::string> bad_lines;
    int overlong = 0;
    int deferred = 0;
    std::optional<ChannelClose> closed;

    ~Peer() {
      if (fd >= 0) close(fd);
    }
    void write(const std::string& bytes) const {
      ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(bytes.size()));
    }
  };

  std::unique_ptr<Peer> open_peer(JsonLineLimits limits = {}) {
    auto p = std::make_unique<Peer>();
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    p->fd = fds[0];
    Peer* raw = p.get();
    JsonLineChannel::Handlers h;
    h.message = [raw](json m) { raw->messages.push_back(std::move(m)); };
    h.bad_line = [raw](std::string_view e) { raw->bad_lines.emplace_back(e); };
    h.overlong = [raw](std::size_t) { ++raw->overlong; };
    h.deferred = [raw] { ++raw->deferred; };
    h.closed = [raw](ChannelClose why) { raw->closed = why; };
    p->channel = std::make_unique<JsonLineChannel>(loop_, fds[1], limits, std::move(h));
    return p;
  }

  void turn() {
    loop_.schedule([] {});
    ASSERT_TRUE(loop_.run_once());
  }

  static std::string numbered_lines(int from, int to) {
    std::string s;
    for (int i = from; i < to; ++i) s += "{\"n\":" + std::to_string(i) + "}\n";
    return s;
  }

  timers::MonotonicClock clock_;
  timers::PollTimeoutAlarm alarm_;
  timers::Dynticks dynticks_{alarm_, clock_, {}};
  EventLoop loop_{make_poller(PollerKind::kPpoll), dynticks_};
};

TEST_F(JsonLineChannelTest, AFloodIsHandledABudgetPerIterationInOrder) {
  JsonLineLimits limits;
  limits.max_lines_per_turn = 4;
  auto p = open_peer(limits);
  p->write(numbered_lines(0, 100));
  std::size_t before = 0;
  for (int i = 0; i < 200 && p->messages.size() < 100; ++i) {
    turn();
    EXPECT_LE(p->messages.size() - before, 4u) << "iteration " << i;
    before = p->messages.size();
  }
  ASSERT_EQ(p->messages.size(), 100u);
  for (std::size_t i = 0; i < 100; ++i) EXPECT_EQ(p->messages[i]["n"], i);
  EXPECT_GE(p->deferred, 24);  // every turn but the last ended with lines left
  EXPECT_EQ(p->channel->buffered_input(), 0u);
  EXPECT_FALSE(p->closed);
}

TEST_F(JsonLineChannelTest, AnotherPeersLineIsNotHeldUpByAFlood) {
  JsonLineLimits limits;
  limits.max_lines_per_turn = 4;
  auto flood = open_peer(limits);
  auto quiet = open_peer(limits);
  flood->write(numbered_lines(0, 1000));
  turn();
  quiet->write("{\"q\":1}\n");
  turn();
  ASSERT_EQ(quiet->messages.size(), 1u);
  EXPECT_LE(flood->messages.size(), 8u);  // two iterations' worth
}

TEST_F(JsonLineChannelTest, LinesLeftOverWhenThePeerHangsUpAreAllHandledFirst) {
  JsonLineLimits limits;
  limits.max_lines_per_turn = 3;
  auto p = open_peer(limits);
  p->write(numbered_lines(0, 50) + "{\"partial\":");
  ASSERT_EQ(shutdown(p->fd, SHUT_WR), 0);
  for (int i = 0; i < 100 && !p->closed; ++i) turn();
  ASSERT_EQ(p->closed, ChannelClose::kPeerClosed);
  ASSERT_EQ(p->messages.size(), 50u);
  EXPECT_EQ(p->messages.back()["n"], 49);
}

TEST_F(JsonLineChannelTest, AnOverlongLineBehindDeferredLinesClosesAfterThem) {
  JsonLineLimits limits;
  limits.max_lines_per_turn = 2;
  limits.max_line = 64;
  auto p = open_peer(limits);
  p->write(numbered_lines(0, 5) + std::string(100, 'x') + "\n" + numbered_lines(5, 6));
  for (int i = 0; i < 20 && !p->closed; ++i) turn();
  EXPECT_EQ(p->closed, ChannelClose::kLineTooLong);
  EXPECT_EQ(p->overlong, 1);
  EXPECT_EQ(p->messages.size(), 5u);  // the lines before it, not the one after
}

TEST_F(JsonLineChannelTest, DestroyingTheChannelWithLinesLeftOverIsSafe) {
  JsonLineLimits limits;
  limits.max_lines_per_turn = 2;
  auto p = open_peer(limits);
  p->write(numbered_lines(0, 10));
  turn();
  ASSERT_EQ(p->messages.size(), 2u);
  p->channel.reset();  // its continuation is still scheduled
  turn();
  turn();
  EXPECT_EQ(p->messages.size(), 2u);
}

TEST_F(JsonLineChannelTest, NumbersNoDoubleHoldsAreBadLinesNotExceptions) {
  auto p = open_peer();
  p->write("[1e309]\n-1e309\n" + std::string(400, '7') + "\n{\"ok\":1}\n");
  for (int i = 0; i < 10 && p->messages.empty(); ++i) turn();
  ASSERT_EQ(p->bad_lines.size(), 3u);
  for (const std::string& e : p->bad_lines) {
    EXPECT_NE(e.find("number overflow"), std::string::npos) << e;
  }
  ASSERT_EQ(p->messages.size(), 1u);
  EXPECT_FALSE(p->closed);
}

TEST_F(JsonLineChannelTest, NestingIsCappedAtMaxDepth) {
  JsonLineLimits limits;
  limits.max_depth = 3;
  auto p = open_peer(limits);
  p->write("[[[1]]]\n[[[[1]]]]\n{\"a\":{\"b\":[\"[[[[\"]}}\n{\"a\":{\"b\":[{}]}}\n");
  for (int i = 0; i < 10 && p->messages.size() + p->bad_lines.size() < 4; ++i) turn();
  ASSERT_EQ(p->messages.size(), 2u);  // the first and the third (brackets in a string)
  ASSERT_EQ(p->bad_lines.size(), 2u);
  EXPECT_EQ(p->bad_lines[0], "nested deeper than 3 levels");
}

}  // namespace
}  // namespace minivmm::loop
