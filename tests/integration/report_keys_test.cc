// Pins the --stats JSON's key set, both ways (issue 21, then issue 30): a key that appears is as
// much a change as one that disappears, as Firecracker's metrics test holds. Scripts read the
// report, so every change to it is made on purpose, here, with its pin file.
// tests/integration/report_keys/NAME.txt holds every key path and JSON type of the report of one
// kind of run (the unmapped ports' numbers are one <port> entry). After a deliberate change,
// regenerate them with
//   MINIVMM_UPDATE_REPORT_KEYS=1 build/tests/integration/boot_tests --gtest_filter='*ReportKeys*'
// and review the diff.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "control_client.h"
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

void walk(const nlohmann::json& v, const std::string& path, std::set<std::string>& out) {
  out.insert(path + " " + json_kind(v));
  if (!v.is_object()) return;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string key = path == "/devices/unmapped_ports" ? "<port>" : it.key();
    walk(it.value(), path + "/" + key, out);
  }
}

struct KeysCase {
  std::string name;  // the file under report_keys/
  std::vector<std::string> args;
  bool restore = false;  // the run restores a snapshot of a guest started with `args`
};

void PrintTo(const KeysCase& c, std::ostream* os) { *os << c.name; }

// A snapshot of the bundled guest taken at its first second and left paused, its VMM killed.
std::string take_snapshot(const std::vector<std::string>& args, const std::string& tag) {
  const std::string sock = "/tmp/minivmm-keys-" + std::to_string(getpid()) + "-" + tag + "-snap.sock";
  const std::string file = "/tmp/minivmm-keys-" + std::to_string(getpid()) + "-" + tag + ".snap";
  std::vector<std::string> run = args;
  run.insert(run.end(), {"--api-socket", sock});
  Child child = start_minivmm(run, false);
  ControlClient client(sock);
  EXPECT_TRUE(client.connected());
  EXPECT_TRUE(wait_for_console(child, "tick 250", 60)) << slurp(child.err_path);
  const auto r = client.call_line(R"({"cmd":"snapshot","path":")" + file + R"(","resume":false})");
  EXPECT_TRUE(r.value("ok", false)) << r.dump();
  ::kill(child.pid, SIGKILL);
  finish_minivmm(child);
  return file;
}

class BootReportKeysTest : public ::testing::TestWithParam<KeysCase> {};

TEST_P(BootReportKeysTest, TheReportHasExactlyThePinnedKeys) {
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
  std::string snapshot;
  if (c.restore) {
    snapshot = take_snapshot(args, c.name);
    args = {"run", "--restore", snapshot, "--no-console-input"};
  }
  const RunResult r = run_minivmm(args);
  unlink(disk);
  if (!snapshot.empty()) unlink(snapshot.c_str());
  ASSERT_TRUE(r.stats.has_value()) << r.err;
  std::set<std::string> have;
  walk(*r.stats, "", have);

  const std::string pin = std::string(MINIVMM_REPORT_KEYS_DIR) + "/" + c.name + ".txt";
  if (std::getenv("MINIVMM_UPDATE_REPORT_KEYS") != nullptr) {
    std::ofstream out(pin);
    for (const std::string& line : have) out << line << "\n";
    ASSERT_TRUE(out.good()) << pin;
    GTEST_SKIP() << "wrote " << pin;
  }
  std::ifstream pinned(pin);
  ASSERT_TRUE(pinned.good()) << pin;
  std::set<std::string> want;
  for (std::string line; std::getline(pinned, line);) {
    if (!line.empty()) want.insert(line);
  }
  EXPECT_GT(want.size(), 100u);
  std::ostringstream missing, extra;
  for (const std::string& k : want) {
    if (!have.count(k)) missing << "  " << k << "\n";
  }
  for (const std::string& k : have) {
    if (!want.count(k)) extra << "  " << k << "\n";
  }
  EXPECT_EQ(missing.str(), "") << "keys of the pinned report that this run lacks (or whose type "
                                  "changed):\n"
                               << missing.str();
  EXPECT_EQ(extra.str(), "") << "keys this run has that the pin does not (a new key is a change "
                                "to the report: regenerate the pin on purpose):\n"
                             << extra.str();
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
                  "DISK,aio=threads"}},
        KeysCase{"testdev", {"--cmdline", "timer=pit hz=250 ticks=20", "--testdev"}},
        KeysCase{"net_user", {"--cmdline", "timer=pit hz=250 ticks=20", "--net", "user"}},
        // virtio-9p (issue 32): a share the bundled guest leaves unmounted.
        KeysCase{"share", {"--cmdline", "timer=pit hz=250 ticks=20", "--share", "/tmp,ro"}},
        KeysCase{"restore", {"--cmdline", "timer=pit hz=250 ticks=300"}, true}),
    [](const ::testing::TestParamInfo<KeysCase>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace minivmm::testing
