// StdoutSink against real pipes: the console whose reader went away.
#include "devices/host/stdout_sink.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tests/support/map_report_writer.h"

namespace minivmm::devices {
namespace {

TEST(StdoutSinkTest, WritesEverythingToAPipe) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  StdoutSink sink(p[1]);
  const std::vector<std::uint8_t> hello{'h', 'i', '\n'};
  sink.write(hello);
  char buf[8];
  EXPECT_EQ(read(p[0], buf, sizeof buf), 3);
  EXPECT_EQ(sink.stats().bytes, 3u);
  EXPECT_FALSE(sink.stats().gone);
  close(p[0]);
  close(p[1]);
}

TEST(StdoutSinkTest, AClosedReaderMeansTheConsoleIsGoneAndCostsNoMoreSyscalls) {
  // As main() does: a console piped into `head` must not kill the VMM with SIGPIPE.
  struct sigaction ign {
  }, old{};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGPIPE, &ign, &old), 0);
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  close(p[0]);
  StdoutSink sink(p[1]);
  const std::vector<std::uint8_t> line(100, 'x');
  sink.write(line);
  auto s = sink.stats();
  EXPECT_TRUE(s.gone);
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.errors, 1u);
  EXPECT_EQ(s.dropped_bytes, 100u);
  for (int i = 0; i < 10; ++i) sink.write(line);
  s = sink.stats();
  EXPECT_EQ(s.writes, 1u);  // no write(2) once the console is gone
  EXPECT_EQ(s.dropped_bytes, 1100u);
  close(p[1]);
  sigaction(SIGPIPE, &old, nullptr);
}

// The run report's "console" object: the keys and types --stats always had, gone a bool.
TEST(StdoutSinkTest, ReportsItsCountersUnderConsole) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  StdoutSink sink(p[1]);
  sink.write(std::vector<std::uint8_t>{'o', 'k', '\n'});
  testing::MapReportWriter report;
  sink.report(report);
  EXPECT_EQ(sink.report_key(), "console");
  EXPECT_EQ(report.typed_paths(),
            (std::set<std::string>{"bytes number", "dropped_bytes number", "errors number",
                                   "gone bool", "writes number"}));
  EXPECT_EQ(report.counter("bytes"), 3u);
  EXPECT_EQ(std::get<bool>(report.values().at("gone")), false);
  close(p[0]);
  close(p[1]);
}

}  // namespace
}  // namespace minivmm::devices
