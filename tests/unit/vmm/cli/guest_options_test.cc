// The guest-visible options are one table (issue 34): vmm/machine/guest_options.h's rows, which
// run_cli.h registers, run_config.cc parses and snapshot_config.cc records. These tests check
// that the CLI registers the rows and nothing else as the guest's (with --drive, --net and
// --share), that a row's default is Config{}'s, and that each choice is one value end to end.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "vmm/cli/run_cli.h"
#include "vmm/machine/guest_options.h"
#include "vmm/machine/snapshot_config.h"

namespace minivmm::vmm {
namespace {

TEST(GuestOptionsTest, TheCliAndTheSnapshotTableNameTheSameOptions) {
  CLI::App app;
  RunOptions o;
  const std::size_t builtin = app.get_options().size();  // --help
  add_guest_options(&app, o);
  std::set<std::string> registered;
  for (const CLI::Option* opt : app.get_options()) registered.insert(opt->get_name());
  ASSERT_GT(registered.size(), builtin);
  registered.erase("--help");
  std::set<std::string> table;
  for (const std::string_view name : guest_visible_options()) {
    EXPECT_TRUE(table.insert(std::string(name)).second) << "twice in the table: " << name;
  }
  EXPECT_EQ(registered, table);
}

// The names the table holds are the ones note_given_options collects, so a given option
// reaches the restore's judgement under the name the table looks up.
TEST(GuestOptionsTest, AGivenGuestOptionIsNotedByItsTableName) {
  CLI::App app;
  RunOptions o;
  add_guest_options(&app, o);
  // CLI11 takes a vector last argument first: this is "--cpus 4 --testdev".
  app.parse(std::vector<std::string>{"--testdev", "4", "--cpus"});
  note_given_options(app, o);
  EXPECT_EQ(o.given, (std::set<std::string>{"--cpus", "--testdev"}));
}

// A row's default text is only a spelling of Config{}'s field (config.h says the default once):
// parsed, it gives the same field, and the CLI shows that text as the default.
TEST(GuestOptionsTest, EachRowsDefaultTextParsesToTheConfigsDefault) {
  CLI::App app;
  RunOptions o;
  add_guest_options(&app, o);
  app.parse(std::vector<std::string>{});
  const Config defaults;
  for (const GuestOption& g : guest_options()) {
    Config c;
    c.memory_bytes = 1;  // every field away from its default first, so the parse must set it
    c.cpus = 7;
    c.pit = PitMode::kKvm;
    c.pit_tick = PitTick::kLoop;
    c.lost_ticks = devices::LostTickPolicy::kDiscard;
    c.cpu = CpuModel::kHost;
    c.cpuid_mask = {"cx16"};
    c.virtio_console = true;
    c.testdev = true;
    const auto why = g.parse(g, o.guest.at(g.name), c);
    ASSERT_FALSE(why) << g.name << ": " << *why;
    EXPECT_TRUE(g.same(c, defaults)) << g.name << ": its default text '" << g.default_text
                                     << "' is not Config{}'s value";
    if (g.kind == GuestOption::Kind::kValue) {
      EXPECT_EQ(app.get_option(g.name)->get_default_str(), g.default_text) << g.name;
    }
  }
}

// Every accepted spelling of a choice row reaches the record and comes back as itself, and the
// contradiction's line names it: the choices are the enum's order, once.
TEST(GuestOptionsTest, EveryChoiceRoundTripsThroughTheRecordAndIsNamedBack) {
  for (const GuestOption& g : guest_options()) {
    for (const std::string_view choice : g.choices) {
      Config c;
      GuestText t;
      t.value = std::string(choice);
      ASSERT_FALSE(g.parse(g, t, c)) << g.name << " " << choice;
      devices::StateWriter out;
      g.save(g, out, c);
      const auto bytes = out.data();
      devices::StateReader in(bytes, "config");
      Config back;
      g.load(g, in, back);
      in.expect_end();
      EXPECT_TRUE(g.same(c, back)) << g.name << " " << choice;
      EXPECT_EQ(g.snapshot_has(g, back), std::string(g.name) + " " + std::string(choice));
    }
    if (!g.choices.empty()) {
      // One past the last choice is no value of this build's: refused, naming the option.
      devices::StateWriter out;
      out.u8(static_cast<std::uint8_t>(g.choices.size()));
      const auto bytes = out.data();
      devices::StateReader in(bytes, "config");
      Config back;
      try {
        g.load(g, in, back);
        ADD_FAILURE() << g.name << ": an unknown value was loaded";
      } catch (const devices::StateError& e) {
        EXPECT_NE(std::string(e.what()).find(g.name), std::string::npos) << e.what();
      }
      GuestText bad;
      bad.value = "no-such-value";
      const auto why = g.parse(g, bad, back);
      ASSERT_TRUE(why) << g.name;
      EXPECT_EQ(why->rfind(std::string(g.name) + ": ", 0), 0u) << *why;
    }
  }
}

}  // namespace
}  // namespace minivmm::vmm
