// `minivmm test` attacked as a careless or hostile user would (issue 31, item 8): thousands of
// tests with names a cfg or a manifest allows (markup, TAP's '#', '/', '..', blanks, control
// characters, 5000 bytes), hostile kvm-unit-tests cfg commands (one that never ends, one that
// writes without end, Ctrl-C while one runs), and malformed manifests. Every run must end on
// its own, leave no process behind and write reports that real parsers read. None starts a
// guest (the tests SKIP by the suite's rules or FAIL for a missing kernel), so no KVM is
// needed: BadInput*, label unit; but the flooding guest (BootTestrunAttack*, label kvm).
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "run_minivmm.h"
#include "testrun_support.h"

namespace minivmm::testing {
namespace {





// How many <testcase>s junitparser finds in `path` (-1 if it cannot read it).
int junit_cases(const std::string& path) {
  const std::string cmd =
      "/usr/bin/python3 -c 'import sys; from junitparser import JUnitXml; "
      "print(sum(1 for s in JUnitXml.fromfile(sys.argv[1]) for c in s))' " + sh_quote(path);
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[64] = {};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  return ::pclose(p) == 0 && got ? std::atoi(buf) : -1;
}


// Processes whose command line holds `needle`, but this one.
int processes_with(const std::string& needle) {
  int n = 0;
  DIR* d = ::opendir("/proc");
  if (!d) return -1;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || std::atoi(e->d_name) == ::getpid()) continue;
    std::string cmd = slurp(std::string("/proc/") + e->d_name + "/cmdline");
    for (char& c : cmd) {
      if (c == '\0') c = ' ';
    }
    n += has(cmd, needle);
  }
  ::closedir(d);
  return n;
}

// A kvm-unit-tests tree whose one kernel is no kernel: the attacks never get to boot it.
void make_fake_suite(const std::string& dir, const std::string& cfg) {
  ::mkdir((dir + "/x86").c_str(), 0755);
  spit(dir + "/config.mak", "ARCH=x86_64\nTEST_DIR=x86\nERRATATXT=\n");
  spit(dir + "/x86/unittests.cfg", cfg);
  spit(dir + "/x86/k.flat", "not a kernel");
}

// 3,000 manifest tests named with markup and TAP's '#' (a manifest refuses blanks and '/'),
// each failing for its missing kernel, and a suite whose entries (SKIP: i386 only) are named
// with what a cfg's brackets hold: '/', '..', blanks, '#', a carriage return, 5000 bytes.
TEST(BadInputTestrunAttackTest, ThousandsOfHostilelyNamedTestsGiveWellFormedReports) {
  TempDir t("attack");
  std::string manifest = "[defaults]\nkernel = \"" + t.path() + "/missing\"\nexit = 1\n";
  const int kTests = 3000;
  for (int i = 0; i < kTests; ++i) {
    manifest += "[[test]]\nname = \"t" + std::to_string(i) + "<&>\\\"'#\\\\..\\u0001\\r\"\n";
  }
  spit(t.path() + "/m.toml", manifest);
  const std::vector<std::string> cfg_names{"../../etc/passwd", "a/b", "..", ".", "a # SKIP b",
                                           "x#TODO", "tab\there", "cr\rhere", "<![CDATA[",
                                           std::string(5000, 'n')};
  std::string cfg;
  for (const auto& n : cfg_names) cfg += "[" + n + "]\nfile = k.flat\narch = i386\n\n";
  make_fake_suite(t.path(), cfg);
  const std::string junit = t.path() + "/r.xml", tap = t.path() + "/r.tap", logs = t.path() + "/logs";

  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run_minivmm({"test", "--kvm-unit-tests", t.path(), "--manifest",
                                   t.path() + "/m.toml", "-j", "8", "--junit", junit, "--tap", tap,
                                   "--logs", logs},
                                  false, 120);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.term_signal, 0);
  // Without KVM the manifest's tests SKIP instead of failing for their missing kernel.
  const bool kvm = !kvm_unavailable_reason();
  EXPECT_EQ(r.exit_code, kvm ? 1 : 0) << r.err.substr(0, 2000);
  EXPECT_TRUE(has(r.out, kvm ? "0 passed, 3000 failed, 10 skipped" : "0 passed, 0 failed, 3010 skipped"))
      << r.out.substr(r.out.size() > 500 ? r.out.size() - 500 : 0);
  EXPECT_LT(took, 60.0);
  EXPECT_TRUE(xml_parses(junit));
  EXPECT_EQ(junit_cases(junit), kTests + 10);
  EXPECT_EQ(check_tap(tap), 0);
  // Nothing outside the logs folder: every log of a '/'- or '..'-named test is inside it.
  DIR* d = ::opendir(t.path().c_str());
  std::vector<std::string> top;
  while (dirent* e = ::readdir(d)) top.emplace_back(e->d_name);
  ::closedir(d);
  EXPECT_EQ(top.size(), 8u) << "., .., x86, config.mak, m.toml, r.xml, r.tap, logs";
  // results.tsv: one line per test and its header.
  EXPECT_EQ(line_count(slurp(logs + "/results.tsv")), kTests + 10 + 1);
}

// After disabled_if, the suite checks a host file: this one never matches, so the entry SKIPs
// once its command is done (or stopped) and no guest starts.
// The suite drops the last entry's disabled_if (kut_config.cc, as its reader does): another
// entry follows.
const std::string kNever = "check = /nonexistent/minivmm=1\n\n[last]\nfile = k.flat\narch = i386\n";

// A cfg's command that never ends held `minivmm test` forever before any test started; one
// that writes without end grew its memory without bound. Each is stopped (10 s, 1 MiB) with
// what it started, said in a warning, and the run goes on.
TEST(BadInputTestrunAttackTest, ACfgCommandThatNeverEndsOrNeverStopsWritingIsStopped) {
  TempDir t("attack");
  make_fake_suite(t.path(),
             "[hangs]\nfile = k.flat\ndisabled_if = sleep 9876.5 & sleep 9876.5\n" + kNever);
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run_minivmm({"test", "--kvm-unit-tests", t.path()}, false, 60);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.term_signal, 0) << "hung";
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.err, "'sleep 9876.5 & sleep 9876.5' ran for 10 s; stopped")) << r.err;
  EXPECT_LT(took, 30.0);
  EXPECT_EQ(processes_with("sleep 9876.5"), 0) << "the cfg's command outlived the run";
}

TEST(BadInputTestrunAttackTest, ACfgCommandThatWritesWithoutEndIsCutAtAMebibyte) {
  TempDir t("attack");
  make_fake_suite(t.path(), "[floods]\nfile = k.flat\ndisabled_if = yes\n" + kNever);
  const RunResult r = run_minivmm({"test", "--kvm-unit-tests", t.path()}, false, 60);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.err, "'yes' wrote more than 1 MiB; stopped")) << r.err;
}

// Ctrl-C while a cfg command runs: the runner ends as SIGINT ends it, and takes the command
// with it (it used to stay, in the runner's process group but not stopped by `timeout`).
TEST(BadInputTestrunAttackTest, CtrlCWhileACfgCommandRunsLeavesNoProcess) {
  TempDir t("attack");
  make_fake_suite(t.path(), "[hangs]\nfile = k.flat\ndisabled_if = sleep 9875.5\n" + kNever);
  Child c = start_minivmm({"test", "--kvm-unit-tests", t.path()}, false);
  for (int i = 0; i < 200 && processes_with("sleep 9875.5") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(processes_with("sleep 9875.5"), 1);
  ASSERT_EQ(::kill(c.pid, SIGINT), 0);
  const RunResult r = finish_minivmm(c, 20);
  EXPECT_EQ(r.term_signal, SIGINT) << r.exit_code << r.err;
  for (int i = 0; i < 100 && processes_with("sleep 9875.5") > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(processes_with("sleep 9875.5"), 0);
}

// A multiboot ELF whose one instruction loop writes 'A' to COM1 for ever: a console of one
// endless line.
std::string flooding_kernel() {
  std::string elf(52 + 32, '\0');
  auto put32 = [&](std::size_t at, std::uint32_t v) {
    for (std::size_t i = 0; i < 4; ++i) elf[at + i] = static_cast<char>(v >> (8 * i));
  };
  auto put16 = [&](std::size_t at, std::uint16_t v) {
    elf[at] = static_cast<char>(v);
    elf[at + 1] = static_cast<char>(v >> 8);
  };
  const std::uint32_t base = 0x100000;
  elf.replace(0, 7, "\x7f" "ELF\x01\x01\x01", 7);
  put16(16, 2);                    // ET_EXEC
  put16(18, 3);                    // EM_386
  put32(20, 1);
  put32(24, base + 96);            // the entry: the code below
  put32(28, 52);                   // program headers
  put16(40, 52);
  put16(42, 32);
  put16(44, 1);
  put16(46, 40);
  // The multiboot header at 84, the code at 96: mov dx, 0x3f8; mov al, 'A'; 1: out dx, al; jmp 1b
  const std::string tail = std::string(12, '\0') + "\x66\xba\xf8\x03\xb0\x41\xee\xeb\xfd";
  elf += tail;
  put32(84, 0x1badb002);
  put32(88, 0);
  put32(92, static_cast<std::uint32_t>(-0x1badb002));
  put32(52, 1);                    // PT_LOAD of the whole file
  put32(56, 0);
  put32(60, base);
  put32(64, base);
  put32(68, static_cast<std::uint32_t>(elf.size()));
  put32(72, static_cast<std::uint32_t>(elf.size()));
  put32(76, 5);
  put32(80, 0x1000);
  return elf;
}

// A guest that floods its console with one endless line until its timeout: the reports and
// the human output quote its last lines, and quoted a whole line (up to the 64 MiB the runner
// reads back) in the TAP report, the JUnit report and on stdout, and kept it in memory for
// every such test until the end. Each quoted line is cut now; the whole log keeps it all.
TEST(BootTestrunAttackTest, AGuestFloodingItsConsoleGetsItsTimeoutAndShortReports) {
  SKIP_WITHOUT_KVM();
  TempDir t("attack");
  spit(t.path() + "/flood.elf", flooding_kernel());
  std::string manifest = "[defaults]\nkernel = \"" + t.path() + "/flood.elf\"\nexit = 1\ntimeout = 3\n";
  manifest += "[[test]]\nname = \"flood0\"\n";
  spit(t.path() + "/m.toml", manifest);
  const std::string junit = t.path() + "/r.xml", tap = t.path() + "/r.tap", logs = t.path() + "/logs";
  const RunResult r = run_minivmm({"test", "--manifest", t.path() + "/m.toml", "--junit",
                                   junit, "--tap", tap, "--logs", logs},
                                  false, 60);
  EXPECT_EQ(r.exit_code, 1) << r.out.substr(0, 2000) << r.err;
  EXPECT_TRUE(has(r.out, "FAIL flood0 (timeout; duration=3s)")) << r.out.substr(0, 2000);
  const auto log_size = slurp(logs + "/flood0.log").size();
  EXPECT_GT(log_size, 20'000u) << "the guest did not flood: nothing tested";
  EXPECT_LT(r.out.size(), 8'000u);
  EXPECT_LT(slurp(tap).size(), 8'000u);
  EXPECT_LT(slurp(junit).size(), 8'000u);
  EXPECT_TRUE(has(slurp(tap), " bytes cut] AAAA")) << slurp(tap);
  EXPECT_TRUE(xml_parses(junit));
  EXPECT_EQ(check_tap(tap), 0);
  EXPECT_EQ(processes_with(logs), 0) << "a flooding guest outlived its timeout";
}

struct BadManifest {
  const char* name;
  std::string text;
  const char* error;  // part of the one line
};

void PrintTo(const BadManifest& m, std::ostream* os) { *os << m.name; }

class BadInputTestrunManifestTest : public ::testing::TestWithParam<BadManifest> {};

// Malformed manifests: exit 2 and one line naming the file, never a crash.
TEST_P(BadInputTestrunManifestTest, ExitsTwoWithOneLine) {
  TempDir t("attack");
  const std::string path = t.path() + "/m.toml";
  spit(path, GetParam().text);
  const RunResult r = run_minivmm({"test", "--manifest", path}, false, 30);
  EXPECT_EQ(r.term_signal, 0) << "crashed or hung";
  EXPECT_EQ(r.exit_code, kUsage) << r.out << r.err;
  EXPECT_TRUE(has(r.err, GetParam().error)) << r.err;
  EXPECT_TRUE(has(r.err, path)) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

const std::string kTest = "[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\n";

INSTANTIATE_TEST_SUITE_P(
    BadInputTestrunManifests, BadInputTestrunManifestTest,
    ::testing::Values(
        BadManifest{"NanTimeout", kTest + "timeout = nan\n", "'timeout' must be 0 (none)"},
        BadManifest{"InfTimeout", kTest + "timeout = inf\n", "'timeout' must be 0 (none)"},
        BadManifest{"NegativeInfTimeout", kTest + "timeout = -inf\n", "'timeout' must be 0 (none)"},
        BadManifest{"StringTimeout", kTest + "timeout = \"10\"\n", "'timeout' must be a number"},
        BadManifest{"HugeExit", "[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 9223372036854775807\n",
                    "exit"},
        BadManifest{"NameWithNewline", "[[test]]\nname = \"a\\nb\"\nkernel = \"/k\"\nexit = 1\n",
                    "has no blanks or '/'"},
        BadManifest{"NameWithSlash", "[[test]]\nname = \"../x\"\nkernel = \"/k\"\nexit = 1\n",
                    "has no blanks or '/'"},
        BadManifest{"Binary", std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 10), "m.toml"},
        BadManifest{"DeepArrays", "a = " + std::string(100000, '[') + std::string(100000, ']') + "\n",
                    "m.toml"},
        BadManifest{"DeepTables", "a = " + [] {
                      std::string s;
                      for (int i = 0; i < 100000; ++i) s += "{b=";
                      s += "1";
                      for (int i = 0; i < 100000; ++i) s += "}";
                      return s;
                    }() + "\n",
                    "m.toml"},
        BadManifest{"TestNotATable", "test = 5\n", "m.toml"},
        BadManifest{"Empty", "", "no test"}),
    [](const ::testing::TestParamInfo<BadManifest>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace minivmm::testing
