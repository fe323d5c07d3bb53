// The guest-visible options are one list (issue 34): the snapshot's table
// (vmm/machine/snapshot_config.cc, which writes the configuration record and judges a restore's
// command line) names exactly the options `run` registers as the guest's (run_cli.h). An option
// added to one and not the other fails here, instead of being silently left out of snapshots.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "vmm/cli/run_cli.h"
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

}  // namespace
}  // namespace minivmm::vmm
