// {"cmd":"reset"} end to end (issue 35), in every tick mode: a guest restored from a snapshot
// runs, is reset in place, and must then be the snapshot again. The proof is a second snapshot
// taken right after the reset: its guest memory is the first one's byte for byte (but the
// mailbox, which keeps the marker written into it), where a snapshot of the same run taken
// before the reset differs (the control: the guest did write). vm_clock is back at the
// snapshot's instant, and the guest ticks on after a reset while running, with no tick lost.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "control_client.h"
#include "run_minivmm.h"
#include "vmm/snapshot/snapshot_file.h"

namespace minivmm::testing {
namespace {

bool host_has_pagemap_scan() {
  utsname u{};
  if (::uname(&u) != 0) return false;
  int major = 0, minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  return major > 6 || (major == 6 && minor >= 7);
}

using namespace std::chrono_literals;

constexpr std::uint64_t kRam = 64ull << 20;
constexpr std::uint64_t kMailboxGpa = 60ull << 20;  // a page the bundled guest never touches
constexpr std::uint64_t kMailboxBytes = 4096;
constexpr const char* kMarker = "6d696e69766d6d2072657365742074657374";  // "minivmm reset test"

std::string path_of(const std::string& what) {
  return "/tmp/minivmm-reset-" + std::to_string(getpid()) + "-" + what;
}

struct SnapshotImage {
  std::vector<std::uint8_t> ram;
  std::int64_t vm_clock_ns = -1;
};

// The guest memory and vm_clock of a snapshot file, as SnapshotFile reads them.
SnapshotImage read_image(const std::string& file) {
  SnapshotImage img;
  const vmm::SnapshotFile f = vmm::SnapshotFile::open(file);
  const auto& clock = f.meta.section("vm_clock").data;
  if (clock.size() == 8) std::memcpy(&img.vm_clock_ns, clock.data(), 8);
  img.ram.resize(f.meta.memory_bytes);
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(f.meta.memory_offset));
  in.read(reinterpret_cast<char*>(img.ram.data()), static_cast<std::streamsize>(img.ram.size()));
  if (!in) img.ram.clear();
  return img;
}

// Pages of `a` and `b` that differ, outside [skip_begin, skip_end).
std::uint64_t pages_differing(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b,
                              std::uint64_t skip_begin, std::uint64_t skip_end) {
  std::uint64_t n = 0;
  for (std::uint64_t at = 0; at + 4096 <= a.size() && at + 4096 <= b.size(); at += 4096) {
    if (at >= skip_begin && at < skip_end) continue;
    if (std::memcmp(a.data() + at, b.data() + at, 4096) != 0) ++n;
  }
  return n;
}

// The guest's progress: its ticks where minivmm's PIT counts them; with KVM's PIT (--pit kvm),
// which counts them where minivmm cannot see, vm_clock in 4 ms steps (a 250 Hz period), and the
// memory the guest wrote (the test's control below) is what shows it ran.
std::uint64_t reset_test_ticks(const nlohmann::json& stats) {
  const auto& t = stats["stats"]["guest"]["ticks_injected"];
  if (t.is_number()) return t.get<std::uint64_t>();
  return static_cast<std::uint64_t>(stats["stats"]["time"]["vm_s"].get<double>() * 250);
}

// Waits until the guest took `n` more ticks than at `from` (as long as a busy host needs).
bool ticks_on(ControlClient& client, std::uint64_t from, std::uint64_t n) {
  for (int i = 0; i < 600; ++i) {
    const auto s = client.call("stats");
    if (s.is_discarded()) return false;
    if (reset_test_ticks(s) >= from + n) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

nlohmann::json snapshot(ControlClient& client, const std::string& file) {
  return client.call_line(R"({"cmd":"snapshot","path":")" + file + R"(","resume":false})");
}

struct ResetCase {
  std::string name;
  std::vector<std::string> args;
};

// ctest and gtest name the case by its tick mode, not by its bytes.
void PrintTo(const ResetCase& c, std::ostream* os) { *os << c.name; }

class BootSnapshotResetTest : public ::testing::TestWithParam<ResetCase> {};

TEST_P(BootSnapshotResetTest, AResetGuestIsItsSnapshotAgainAndTicksOn) {
  SKIP_WITHOUT_KVM();
  const ResetCase& tc = GetParam();
  const std::string sock = path_of(tc.name + ".sock"), s0 = path_of(tc.name + "-s0"),
                    before = path_of(tc.name + "-before"), after = path_of(tc.name + "-after");
  std::vector<std::string> boot = {"run", "--kernel", guest_image(), "--cmdline",
                                   "timer=pit hz=250 ticks=0", "--memory", "64M",
                                   "--api-socket", sock, "--no-console-input"};
  boot.insert(boot.end(), tc.args.begin(), tc.args.end());
  {
    Child child = start_minivmm(boot);
    ControlClient client(sock);
    ASSERT_TRUE(client.connected());
    const auto first = client.call("stats");
    ASSERT_FALSE(first.is_discarded());
    ASSERT_TRUE(ticks_on(client, reset_test_ticks(first), 50));
    ASSERT_TRUE(snapshot(client, s0).value("ok", false));
    ::kill(child.pid, SIGKILL);
    finish_minivmm(child);
  }
  const SnapshotImage original = read_image(s0);
  ASSERT_EQ(original.ram.size(), kRam);

  char mailbox[64];
  std::snprintf(mailbox, sizeof mailbox, "0x%llx,%llu",
                static_cast<unsigned long long>(kMailboxGpa),
                static_cast<unsigned long long>(kMailboxBytes));
  Child child = start_minivmm({"run", "--restore", s0, "--api-socket", sock, "--mailbox", mailbox,
                               "--no-console-input", "--duration", "120"});
  ControlClient client(sock);
  ASSERT_TRUE(client.connected());
  const auto start = client.call("stats");
  ASSERT_FALSE(start.is_discarded());
  ASSERT_TRUE(ticks_on(client, reset_test_ticks(start), 50)) << "the restored guest does not tick";
  const auto wrote = client.call_line(std::string(R"({"cmd":"mailbox","offset":16,"write":")") +
                                      kMarker + "\"}");
  ASSERT_TRUE(wrote.value("ok", false)) << wrote.dump();

  // The control: what the guest did since the restore shows in a snapshot before the reset.
  ASSERT_TRUE(snapshot(client, before).value("ok", false));
  const SnapshotImage ran = read_image(before);
  EXPECT_GT(pages_differing(original.ram, ran.ram, kMailboxGpa, kMailboxGpa + kMailboxBytes), 0u)
      << "the guest wrote nothing: this test could not tell a reset from none";
  EXPECT_GT(ran.vm_clock_ns, original.vm_clock_ns);

  // A paused guest's reset: it stays paused, at the snapshot's instant, its memory the file's.
  const auto reset = client.call("reset");
  ASSERT_TRUE(reset.value("ok", false)) << reset.dump();
  EXPECT_EQ(reset["state"], "paused");
  EXPECT_GT(reset["pages_dropped"].get<std::uint64_t>(), 0u) << reset.dump();
  // Linux 6.7 and later have PAGEMAP_SCAN, and the reset must have used it there (the seccomp
  // list allows it on the restore's pagemap descriptor only).
  EXPECT_EQ(reset["written_pages_by"], host_has_pagemap_scan() ? "PAGEMAP_SCAN" : "pagemap read")
      << reset.dump();
  EXPECT_EQ(reset["vm_clock_ns"].get<std::int64_t>(), original.vm_clock_ns);
  ASSERT_TRUE(snapshot(client, after).value("ok", false));
  const SnapshotImage back = read_image(after);
  EXPECT_EQ(back.vm_clock_ns, original.vm_clock_ns);
  EXPECT_EQ(pages_differing(original.ram, back.ram, kMailboxGpa, kMailboxGpa + kMailboxBytes), 0u)
      << "pages of the run before the reset leaked through it";
  const auto box = client.call_line(R"({"cmd":"mailbox","offset":16,"read":18})");
  EXPECT_EQ(box.value("hex", ""), kMarker) << "the mailbox did not survive the reset";

  // Running again from the snapshot; then a reset of a running guest, which runs on.
  ASSERT_TRUE(client.call("resume").value("ok", false));
  const auto resumed = client.call("stats");
  ASSERT_TRUE(ticks_on(client, reset_test_ticks(resumed), 50)) << "no tick after the reset";
  const auto running = client.call("reset");
  ASSERT_TRUE(running.value("ok", false)) << running.dump();
  EXPECT_EQ(running["state"], "running");
  const auto again = client.call("stats");
  EXPECT_FALSE(again["stats"]["time"]["paused"].get<bool>());
  EXPECT_TRUE(ticks_on(client, reset_test_ticks(again), 50)) << "no tick after a running reset";

  EXPECT_TRUE(client.call("quit").value("ok", false));
  const RunResult r = finish_minivmm(child, 30);
  for (const auto& f : {s0, before, after}) ::unlink(f.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(r.stats.has_value());
  const auto& snap = (*r.stats)["snapshot"];
  EXPECT_EQ(snap["resets"].get<std::uint64_t>(), 2u) << snap.dump();
  EXPECT_GT(snap["reset_pages_dropped"].get<std::uint64_t>(), 0u);
  const auto& guest = (*r.stats)["guest"];
  if (guest.contains("ticks_lost") && guest["ticks_lost"].is_number()) {
    EXPECT_EQ(guest["ticks_lost"].get<std::uint64_t>(), 0u) << guest.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, BootSnapshotResetTest,
    ::testing::Values(ResetCase{"kernel", {"--pit-tick", "kernel"}},
                      ResetCase{"vcpu", {"--pit-tick", "vcpu"}},
                      ResetCase{"loop", {"--pit-tick", "loop"}},
                      ResetCase{"kvm_pit", {"--pit", "kvm"}}),
    [](const ::testing::TestParamInfo<ResetCase>& p) { return p.param.name; });

// What a reset refuses: a guest that was booted, not restored, and mailbox requests without a
// mailbox; the run goes on.
TEST(BootSnapshotResetTest, ABootedGuestHasNothingToResetTo) {
  SKIP_WITHOUT_KVM();
  const std::string sock = path_of("booted.sock");
  Child child = start_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                               "timer=pit hz=250 ticks=0", "--api-socket", sock,
                               "--no-console-input", "--duration", "60"});
  ControlClient client(sock);
  ASSERT_TRUE(client.connected());
  const auto r = client.call("reset");
  EXPECT_FALSE(r.value("ok", true)) << r.dump();
  EXPECT_NE(r.value("error", "").find("not restored"), std::string::npos) << r.dump();
  const auto m = client.call_line(R"({"cmd":"mailbox","read":4})");
  EXPECT_FALSE(m.value("ok", true)) << m.dump();
  EXPECT_TRUE(client.call("quit").value("ok", false));
  const RunResult res = finish_minivmm(child, 30);
  EXPECT_EQ(res.exit_code, 0) << res.err;
}

// A virtio-blk guest reset three times as it runs (its disk requests quiesced first, its queues
// loaded again) still finishes its disk check: the disk keeps what the guest wrote, as a reset
// leaves every drive alone, and the guest's own second pass reads the sums it expects.
TEST(BootSnapshotResetTest, AVirtioBlkGuestResetAsItRunsFinishesItsDiskCheck) {
  SKIP_WITHOUT_KVM();
  const std::string sock = path_of("blk.sock"), s0 = path_of("blk-s0"), disk = path_of("blk.img"),
                    copy = path_of("blk-copy.img");
  ASSERT_EQ(::close(::open(disk.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600)), 0);
  ASSERT_EQ(::truncate(disk.c_str(), 1 << 20), 0);
  {
    Child child = start_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                                 "timer=pit hz=250 ticks=750 blk=twice", "--drive", disk,
                                 "--api-socket", sock, "--no-console-input"});
    ControlClient client(sock);
    ASSERT_TRUE(client.connected());
    ASSERT_TRUE(wait_for_console(child, "tick 250", 60)) << slurp(child.err_path);
    ASSERT_TRUE(snapshot(client, s0).value("ok", false));
    ::kill(child.pid, SIGKILL);
    finish_minivmm(child);
  }
  ASSERT_EQ(std::system(("cp " + disk + " " + copy).c_str()), 0);
  Child child = start_minivmm({"run", "--restore", s0, "--restore-drive", "0=" + copy,
                               "--api-socket", sock, "--no-console-input", "--duration", "120"});
  ControlClient client(sock);
  ASSERT_TRUE(client.connected());
  for (int i = 0; i < 3; ++i) {
    const auto before = client.call("stats");
    ASSERT_TRUE(ticks_on(client, reset_test_ticks(before), 40));
    const auto r = client.call("reset");
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    EXPECT_EQ(r["state"], "running");
  }
  const RunResult res = finish_minivmm(child, 60);
  for (const auto& f : {s0, disk, copy}) ::unlink(f.c_str());
  EXPECT_EQ(res.exit_code, kGuestSuccess) << res.err << res.out;
  EXPECT_TRUE(has(res.out, "blk: scratch ok")) << res.out;
  EXPECT_TRUE(has(res.out, "done 750")) << res.out;
  ASSERT_TRUE(res.stats.has_value());
  EXPECT_EQ((*res.stats)["snapshot"]["resets"].get<std::uint64_t>(), 3u);
  EXPECT_EQ((*res.stats)["guest"]["ticks_lost"].get<std::uint64_t>(), 0u);
  // The rate is the last run's since its reset, not the resets' sum over a clock gone back.
  EXPECT_LT((*res.stats)["guest"]["hz_measured"].get<double>(), 300.0);
}

// `minivmm test` runs rounds of one test from one booted state: a manifest test with `restore`
// and `resets = 3` is one `minivmm run --restore S --reset-on-exit 3`, in every tick mode. Each
// round is the guest's last 200-odd ticks from the snapshot to its "done 250" exit, then a
// reset; the fourth exit ends the run. The logs' run report has every round's status and the
// console every round's lines.
TEST(BootSnapshotResetTest, AManifestTestRunsRoundsFromItsSnapshotInEveryTickMode) {
  SKIP_WITHOUT_KVM();
  const std::string dir = path_of("rounds");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  std::string manifest;
  for (const ResetCase& tc : {ResetCase{"kernel", {"--pit-tick", "kernel"}},
                              ResetCase{"vcpu", {"--pit-tick", "vcpu"}},
                              ResetCase{"loop", {"--pit-tick", "loop"}},
                              ResetCase{"kvm_pit", {"--pit", "kvm"}}}) {
    const std::string sock = dir + "/" + tc.name + ".sock", snap = dir + "/" + tc.name + ".snap";
    std::vector<std::string> boot = {"run", "--kernel", guest_image(), "--cmdline",
                                     "timer=pit hz=250 ticks=250", "--api-socket", sock,
                                     "--no-console-input"};
    boot.insert(boot.end(), tc.args.begin(), tc.args.end());
    Child child = start_minivmm(boot);
    ControlClient client(sock);
    ASSERT_TRUE(client.connected());
    ASSERT_TRUE(wait_for_console(child, "minivmm-guest:", 30)) << slurp(child.err_path);
    ASSERT_TRUE(snapshot(client, snap).value("ok", false)) << tc.name;
    ::kill(child.pid, SIGKILL);
    finish_minivmm(child);
    manifest += "[[test]]\nname = \"rounds-" + tc.name + "\"\nrestore = \"" + snap +
                "\"\nresets = 3\nexit = 1\nconsole = [\"done 250\"]\ntimeout = 60\n\n";
  }
  const std::string toml = dir + "/rounds.toml", logs = dir + "/logs";
  {
    std::ofstream out(toml);
    out << manifest;
  }
  const RunResult r = run_minivmm({"test", "--manifest", toml, "--logs", logs, "-j", "2"}, false);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "4 passed, 0 failed, 0 skipped")) << r.out;
  for (const char* mode : {"kernel", "vcpu", "loop", "kvm_pit"}) {
    const std::string base = logs + "/rounds-" + mode;
    const std::string console = slurp(base + ".log");
    std::size_t rounds = 0;
    for (auto at = console.find("done 250"); at != std::string::npos;
         at = console.find("done 250", at + 1)) {
      ++rounds;
    }
    EXPECT_EQ(rounds, 4u) << mode << ":\n" << console;
    const auto report = nlohmann::json::parse(slurp(base + ".json"), nullptr, false);
    ASSERT_FALSE(report.is_discarded()) << mode;
    EXPECT_EQ(report["snapshot"]["round_statuses"], nlohmann::json({1, 1, 1, 1})) << mode;
    EXPECT_EQ(report["snapshot"]["resets"].get<std::uint64_t>(), 3u) << mode;
  }
  // A test both booted and restored, or rounds of a booted one: the manifest is refused.
  for (const std::string& bad :
       {std::string("[[test]]\nname = \"x\"\nkernel = \"k\"\nrestore = \"s\"\nexit = 1\n"),
        std::string("[[test]]\nname = \"x\"\nkernel = \"k\"\nresets = 2\nexit = 1\n"),
        std::string("[[test]]\nname = \"x\"\nrestore = \"s\"\ncmdline = \"a\"\nexit = 1\n"),
        std::string("[[test]]\nname = \"x\"\nrestore = \"s\"\nresets = 0\nexit = 1\n")}) {
    {
      std::ofstream out(toml);
      out << bad;
    }
    const RunResult b = run_minivmm({"test", "--manifest", toml}, false);
    EXPECT_EQ(b.exit_code, 2) << bad << b.err;
  }
  std::system(("rm -rf " + dir).c_str());
}

// Hostile mailbox requests get an error reply each and the guest runs on; a mailbox past the
// guest's RAM or without --restore is a usage error before anything runs.
TEST(BootSnapshotResetTest, HostileMailboxRequestsAreRefusedAndTheGuestRunsOn) {
  SKIP_WITHOUT_KVM();
  const std::string sock = path_of("hostile.sock"), s0 = path_of("hostile-s0");
  {
    Child child = start_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                                 "timer=pit hz=250 ticks=0", "--api-socket", sock,
                                 "--no-console-input", "--duration", "60"});
    ControlClient client(sock);
    ASSERT_TRUE(client.connected());
    ASSERT_TRUE(ticks_on(client, 0, 10));
    ASSERT_TRUE(snapshot(client, s0).value("ok", false));
    ::kill(child.pid, SIGKILL);
    finish_minivmm(child);
  }
  const RunResult past = run_minivmm({"run", "--restore", s0, "--mailbox", "0x4000000,4096",
                                      "--duration", "1"});
  EXPECT_EQ(past.exit_code, 2) << past.err;
  EXPECT_NE(past.err.find("--mailbox"), std::string::npos) << past.err;
  const RunResult booted = run_minivmm({"run", "--kernel", guest_image(), "--mailbox",
                                        "0x200000,4096", "--duration", "1"});
  EXPECT_EQ(booted.exit_code, 2) << booted.err;
  for (const char* bad : {"4096", "0x200001,4096", "0x200000,0", "x,y"}) {
    const RunResult r = run_minivmm({"run", "--restore", s0, "--mailbox", bad, "--duration", "1"});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
  }

  Child child = start_minivmm({"run", "--restore", s0, "--api-socket", sock, "--mailbox",
                               "0x3c00000,8192", "--no-console-input", "--duration", "60"});
  ControlClient client(sock);
  ASSERT_TRUE(client.connected());
  for (const char* req : {
           R"({"cmd":"mailbox"})",
           R"({"cmd":"mailbox","read":8,"write":"00"})",
           R"({"cmd":"mailbox","read":8193})",
           R"({"cmd":"mailbox","offset":8192,"read":1})",
           R"({"cmd":"mailbox","offset":18446744073709551615,"read":2})",
           R"({"cmd":"mailbox","offset":4096,"read":18446744073709551615})",
           R"({"cmd":"mailbox","offset":-1,"read":1})",
           R"({"cmd":"mailbox","read":1.5})",
           R"({"cmd":"mailbox","read":"8"})",
           R"({"cmd":"mailbox","write":"abc"})",
           R"({"cmd":"mailbox","write":"zz"})",
           R"({"cmd":"mailbox","write":42})",
           R"({"cmd":"mailbox","offset":8191,"write":"0000"})",
       }) {
    const auto r = client.call_line(req);
    ASSERT_FALSE(r.is_discarded()) << req;
    EXPECT_FALSE(r.value("ok", true)) << req << " -> " << r.dump();
  }
  // The edges that are allowed: the last byte, and a read of nothing.
  EXPECT_TRUE(client.call_line(R"({"cmd":"mailbox","offset":8191,"write":"7f"})").value("ok", false));
  EXPECT_EQ(client.call_line(R"({"cmd":"mailbox","offset":8191,"read":1})").value("hex", ""), "7f");
  EXPECT_EQ(client.call_line(R"({"cmd":"mailbox","offset":8192,"read":0})").value("hex", "x"), "");
  const auto before = client.call("stats");
  EXPECT_TRUE(ticks_on(client, reset_test_ticks(before), 20)) << "the guest stopped";
  EXPECT_TRUE(client.call("quit").value("ok", false));
  const RunResult res = finish_minivmm(child, 30);
  ::unlink(s0.c_str());
  EXPECT_EQ(res.exit_code, 0) << res.err;
}

}  // namespace
}  // namespace minivmm::testing
