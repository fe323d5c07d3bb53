// Pins the --stats JSON's key set (issue 21): the report is built from the devices now, and
// nothing a user's script reads may disappear or move. tests/integration/report_keys/*.txt
// hold every key path and JSON type of the report as it was before the redesign, for each
// kind of run (made by dump_keys.py there). A run must have every one of them, with the same
// type; new keys are allowed. The one exception is the test devices' keys (devices.fw_cfg,
// devices.pc_testdev), which a VM has only with --testdev.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "run_minivmm.h"

namespace minivmm::testing {
namespace {

std::string json_kind(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "bool";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

// The same walk as dump_keys.py.
void walk(const nlohmann::json& v, const std::string& path, std::set<std::string>& out) {
  out.insert(path + " " + json_kind(v));
  if (!v.is_object()) return;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string key = path == "/devices/unmapped_ports" ? "<port>" : it.key();
    walk(it.value(), path + "/" + key, out);
  }
}

bool is_testdev_key(const std::string& line) {
  return line.rfind("/devices/fw_cfg", 0) == 0 || line.rfind("/devices/pc_testdev", 0) == 0;
}

struct KeysCase {
  std::string name;  // the file under report_keys/
  std::vector<std::string> args;
};

void PrintTo(const KeysCase& c, std::ostream* os) { *os << c.name; }

class BootReportKeysTest : public ::testing::TestWithParam<KeysCase> {};

TEST_P(BootReportKeysTest, EveryKeyOfThePinnedReportIsStillThere) {
  SKIP_WITHOUT_KVM();
  const KeysCase& c = GetParam();
  char disk[] = "/tmp/minivmm-keys-disk-XXXXXX";
  const int fd = mkstemp(disk);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
  close(fd);
  const std::string sock = "/tmp/minivmm-keys-" + std::to_string(getpid()) + "-" + c.name + ".sock";
  std::vector<std::string> args{"run", "--kernel", guest_image(), "--no-console-input"};
  for (const std::string& a : c.args) {
    std::string arg = a;
    if (const auto at = arg.find("DISK"); at != std::string::npos) arg.replace(at, 4, disk);
    args.push_back(arg == "SOCK" ? sock : arg);
  }
  const RunResult r = run_minivmm(args);
  unlink(disk);
  ASSERT_TRUE(r.stats.has_value()) << r.err;
  std::set<std::string> have;
  walk(*r.stats, "", have);

  std::ifstream pinned(std::string(MINIVMM_REPORT_KEYS_DIR) + "/" + c.name + ".txt");
  ASSERT_TRUE(pinned.good()) << c.name;
  std::ostringstream missing;
  int expected = 0;
  for (std::string line; std::getline(pinned, line);) {
    if (line.empty() || is_testdev_key(line)) continue;
    ++expected;
    if (!have.count(line)) missing << "  " << line << "\n";
  }
  EXPECT_GT(expected, 100);
  EXPECT_EQ(missing.str(), "") << "keys of the pinned report that this run lacks (or whose type "
                                  "changed):\n"
                               << missing.str();
}

INSTANTIATE_TEST_SUITE_P(
    Runs, BootReportKeysTest,
    ::testing::Values(
        KeysCase{"pit_tick_kernel", {"--cmdline", "timer=pit hz=250 ticks=20"}},
        KeysCase{"pit_tick_vcpu", {"--cmdline", "timer=pit hz=250 ticks=20", "--pit-tick", "vcpu"}},
        KeysCase{"pit_tick_loop", {"--cmdline", "timer=pit hz=250 ticks=20", "--pit-tick", "loop"}},
        KeysCase{"pit_kvm", {"--cmdline", "timer=pit hz=250 ticks=20", "--pit", "kvm"}},
        KeysCase{"virtio_socket_auto",
                 {"--cmdline", "timer=pit hz=250 ticks=20 blk=check", "--drive", "DISK",
                  "--console", "virtio", "--api-socket", "SOCK", "--poll", "auto"}},
        KeysCase{"drive_threads",
                 {"--cmdline", "timer=pit hz=250 ticks=20 blk=check", "--drive",
                  "DISK,aio=threads"}}),
    [](const ::testing::TestParamInfo<KeysCase>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace minivmm::testing
