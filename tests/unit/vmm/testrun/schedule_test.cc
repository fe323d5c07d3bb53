// Longest first by an earlier run's times; the unknown first; reports unaffected.
#include "vmm/testrun/schedule.h"

#include <gtest/gtest.h>

namespace {

using minivmm::testrun::previous_durations;
using minivmm::testrun::start_order;
using minivmm::testrun::TestCase;

std::vector<TestCase> named(std::initializer_list<const char*> names) {
  std::vector<TestCase> out;
  for (const char* n : names) {
    TestCase t;
    t.name = n;
    out.push_back(t);
  }
  return out;
}

TEST(ScheduleTest, ReadsTheDurationColumnOfResultsTsv) {
  const auto d = previous_durations(
      "name\tverdict\tdetail\tduration_s\tvmm_s\trunner_ms\n"
      "debug\tFAIL\ttimeout; duration=90s\t90.160\t90.147\t13.298\n"
      "smptest\tPASS\t1 tests\t0.277\t0.271\t6.448\n"
      "broken\tPASS\n"
      "negative\tPASS\t\t-1\t0\t0\n"
      "nan\tPASS\t\tx\t0\t0\n"
      "last\tSKIP\ti386 only\t0.000\t0.000\t0.001");
  EXPECT_EQ(d, (std::map<std::string, double>{{"debug", 90.16}, {"smptest", 0.277}, {"last", 0}}));
}

TEST(ScheduleTest, WithoutEarlierTimesTheOrderIsTheSources) {
  const auto tests = named({"a", "b", "c"});
  EXPECT_EQ(start_order(tests, {}), (std::vector<std::size_t>{0, 1, 2}));
}

TEST(ScheduleTest, LongestFirstAndTheUnknownBeforeThem) {
  const auto tests = named({"short", "new1", "debug", "mid", "new2"});
  const std::map<std::string, double> previous{{"short", 0.3}, {"debug", 90}, {"mid", 12}};
  EXPECT_EQ(start_order(tests, previous), (std::vector<std::size_t>{1, 4, 2, 3, 0}));
}

}  // namespace
