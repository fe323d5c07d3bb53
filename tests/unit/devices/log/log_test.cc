// The logging front end (devices/log/log.h): messages reach spdlog's default logger formatted and at
// their level, and nothing is formatted below the logger's level (calls on per-exit paths rely
// on that).
#include "devices/log/log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

namespace log = minivmm::log;

// An argument whose formatting is counted.
struct Counted {
  int* formatted;
};

}  // namespace

template <>
struct fmt::formatter<Counted> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  auto format(const Counted& c, fmt::format_context& ctx) const {
    ++*c.formatted;
    // By hand rather than fmt::format_to, which would compile fmt's formatting code here.
    auto out = ctx.out();
    for (const char ch : std::string_view("counted")) *out++ = ch;
    return out;
  }
};

namespace {

class CaptureSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::pair<spdlog::level::level_enum, std::string>> messages;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    messages.emplace_back(msg.level, std::string(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}
};

// Makes a logger into a CaptureSink the default for one test, and puts the old one back.
class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = spdlog::default_logger();
    sink_ = std::make_shared<CaptureSink>();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink_));
  }
  void TearDown() override { spdlog::set_default_logger(saved_); }

  const std::vector<std::pair<spdlog::level::level_enum, std::string>>& messages() const {
    return sink_->messages;
  }

 private:
  std::shared_ptr<spdlog::logger> saved_;
  std::shared_ptr<CaptureSink> sink_;
};

TEST_F(LogTest, EachLevelReachesTheDefaultLoggerFormatted) {
  log::set_level(log::Level::trace);
  const std::string path = "/tmp/disk.img";
  log::trace("t {}", 1);
  log::debug("guest: unmapped port {} 0x{:04x} width {}", "read", 0x61, 1u);
  log::info("no arguments");
  log::warn("drive {}: {} bytes", path, std::uint64_t{511});
  log::error("vcpu{}: rip={:#018x}", 0, std::uint64_t{0xfff0});
  log::critical("{:.3f} {}", 1.5, 'c');
  using L = spdlog::level::level_enum;
  const std::vector<std::pair<L, std::string>> want = {
      {L::trace, "t 1"},
      {L::debug, "guest: unmapped port read 0x0061 width 1"},
      {L::info, "no arguments"},
      {L::warn, "drive /tmp/disk.img: 511 bytes"},
      {L::err, "vcpu0: rip=0x000000000000fff0"},
      {L::critical, "1.500 c"},
  };
  EXPECT_EQ(messages(), want);
}

TEST_F(LogTest, NothingIsFormattedBelowTheLevel) {
  log::set_level(log::Level::warn);
  int formatted = 0;
  log::trace("{}", Counted{&formatted});
  log::debug("{}", Counted{&formatted});
  log::info("{}", Counted{&formatted});
  EXPECT_EQ(formatted, 0);
  EXPECT_TRUE(messages().empty());
  log::warn("{}", Counted{&formatted});
  EXPECT_EQ(formatted, 1);
  ASSERT_EQ(messages().size(), 1u);
  EXPECT_EQ(messages()[0].second, "counted");
}

TEST_F(LogTest, OffSilencesEveryLevel) {
  log::set_level(log::Level::off);
  int formatted = 0;
  log::error("{}", Counted{&formatted});
  log::critical("{}", Counted{&formatted});
  EXPECT_EQ(formatted, 0);
  EXPECT_TRUE(messages().empty());
}

TEST_F(LogTest, MessagesLongerThanTheInlineBufferArriveWhole) {
  log::set_level(log::Level::info);
  const std::string long_text(1000, 'x');
  log::info("[{}]", long_text);
  ASSERT_EQ(messages().size(), 1u);
  EXPECT_EQ(messages()[0].second, "[" + long_text + "]");
}

TEST(LogLevelTest, NamesAreSpdlogs) {
  EXPECT_EQ(log::level_from_name("trace"), log::Level::trace);
  EXPECT_EQ(log::level_from_name("debug"), log::Level::debug);
  EXPECT_EQ(log::level_from_name("info"), log::Level::info);
  EXPECT_EQ(log::level_from_name("warn"), log::Level::warn);
  EXPECT_EQ(log::level_from_name("warning"), log::Level::warn);
  EXPECT_EQ(log::level_from_name("error"), log::Level::error);
  EXPECT_EQ(log::level_from_name("err"), log::Level::error);
  EXPECT_EQ(log::level_from_name("critical"), log::Level::critical);
  EXPECT_EQ(log::level_from_name("off"), log::Level::off);
  EXPECT_EQ(log::level_from_name("loud"), log::Level::off);
}

}  // namespace
