// ReportWriter's one default (a list for writers without arrays) and the tests' MapReportWriter,
// which every device's report test reads back through.
#include "devices/bus/report_writer.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "tests/support/map_report_writer.h"

namespace {

using minivmm::devices::ReportWriter;
using minivmm::testing::MapReportWriter;

// A writer with no arrays of its own: counters by path, nothing else.
class PathWriter final : public ReportWriter {
 public:
  explicit PathWriter(std::map<std::string, std::uint64_t>& out, std::string prefix = "")
      : out_(out), prefix_(std::move(prefix)) {}
  void count(std::string_view key, std::uint64_t value) override {
    out_[prefix_ + std::string(key)] = value;
  }
  void number(std::string_view, double) override {}
  void flag(std::string_view, bool) override {}
  void text(std::string_view, std::string_view) override {}
  void object(std::string_view key, const std::function<void(ReportWriter&)>& fill) override {
    PathWriter child(out_, prefix_ + std::string(key) + "/");
    fill(child);
  }

 private:
  std::map<std::string, std::uint64_t>& out_;
  std::string prefix_;
};

TEST(ReportWriterTest, DefaultListWritesItemsAsObjectsKeyedByIndex) {
  std::map<std::string, std::uint64_t> out;
  PathWriter w(out);
  w.list("queues", 2, [](std::size_t i, ReportWriter& q) { q.count("chains", 10 + i); });
  EXPECT_EQ(out, (std::map<std::string, std::uint64_t>{{"queues/0/chains", 10},
                                                       {"queues/1/chains", 11}}));
}

TEST(MapReportWriterTest, TypedPathsNameEveryValueAndContainerWithItsJsonType) {
  MapReportWriter w;
  w.count("n", 1);
  w.number("x", 0.5);
  w.flag("gone", false);
  w.text("engine", "inline");
  w.object("errors", [](ReportWriter&) {});
  w.list("queues", 1, [](std::size_t, ReportWriter& q) { q.count("used", 3); });
  EXPECT_EQ(w.typed_paths(),
            (std::set<std::string>{"n number", "x number", "gone bool", "engine string",
                                   "errors object", "queues array", "queues/0 object",
                                   "queues/0/used number"}));
  EXPECT_EQ(w.counter("queues/0/used"), 3u);
}

}  // namespace
