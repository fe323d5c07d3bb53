// unittests.cfg read as the suite's for_each_unittest reads it: keys, defaults, the quirks
// (no comments, a dropped last line, the last entry's disabled_if) and the warnings.
#include "vmm/testrun/kut_config.h"

#include <gtest/gtest.h>

namespace {

using minivmm::testrun::find_word;
using minivmm::testrun::kut_command_text;
using minivmm::testrun::parse_kut_config;

TEST(KutConfigTest, ReadsEveryKeyAndResetsThemPerEntry) {
  const auto cfg = parse_kut_config(
      "# header comment\n"
      "[x2apic]\n"
      "file = apic.flat\n"
      "smp = 2\n"
      "qemu_params = -cpu qemu64,+x2apic,+tsc-deadline\n"
      "arch = x86_64\n"
      "timeout = 30\n"
      "groups = apic\n"
      "\n"
      "[vmexit_cpuid]\n"
      "file = vmexit.flat\n"
      "test_args = 'cpuid'\n"
      "groups = vmexit\n"
      "check = /sys/a=Y /proc/b=0\n"
      "accel = kvm\n"
      "machine = q35\n",
      "x86/unittests.cfg");
  ASSERT_EQ(cfg.entries.size(), 2u);
  const auto& a = cfg.entries[0];
  EXPECT_EQ(a.name, "x2apic");
  EXPECT_EQ(a.line, 2);
  EXPECT_EQ(a.file, "apic.flat");
  EXPECT_EQ(a.smp, "2");
  EXPECT_EQ(a.params, "-cpu qemu64,+x2apic,+tsc-deadline");
  EXPECT_EQ(a.arch, "x86_64");
  EXPECT_EQ(a.timeout, "30");
  EXPECT_EQ(a.groups, "apic");
  EXPECT_FALSE(a.has_test_args);
  const auto& b = cfg.entries[1];
  EXPECT_EQ(b.smp, "1") << "reset to the default";
  EXPECT_TRUE(b.has_test_args);
  EXPECT_EQ(b.test_args, "'cpuid'") << "quotes are the shell's, later";
  EXPECT_EQ(b.params, "");
  EXPECT_EQ(b.check, "/sys/a=Y /proc/b=0");
  EXPECT_EQ(b.accel, "kvm");
  EXPECT_EQ(b.machine, "q35");
  EXPECT_TRUE(cfg.warnings.empty());
}

TEST(KutConfigTest, HashLinesAreNoEntriesButAHashInAValueStays) {
  const auto cfg = parse_kut_config(
      "#[init]\n#file = init.flat\n[a]\nfile = a.flat # not a comment\n", "c");
  ASSERT_EQ(cfg.entries.size(), 1u);
  EXPECT_EQ(cfg.entries[0].file, "a.flat # not a comment");
}

TEST(KutConfigTest, TrimsBlanksAndAllowsSpacesButNotTabsAroundTheEquals) {
  const auto cfg = parse_kut_config(
      "  [a]  \n\tfile   =   a.flat\t\nsmp=4\ntimeout\t= 5\n", "c");
  ASSERT_EQ(cfg.entries.size(), 1u);
  EXPECT_EQ(cfg.entries[0].file, "a.flat");
  EXPECT_EQ(cfg.entries[0].smp, "4");
  EXPECT_EQ(cfg.entries[0].timeout, "") << "a tab before '=' is no key to the suite";
  ASSERT_EQ(cfg.warnings.size(), 1u);
  EXPECT_EQ(cfg.warnings[0], "c:4: 'timeout' is not a key run_tests.sh reads; ignored");
}

TEST(KutConfigTest, UnknownKeysAreWarnedOnceEach) {
  const auto cfg = parse_kut_config(
      "[a]\nAccel = kvm\nfoo = 1\n[b]\nAccel = tcg\nkvmtool_params = --x\n", "x86/unittests.cfg");
  ASSERT_EQ(cfg.entries.size(), 2u);
  EXPECT_EQ(cfg.entries[0].accel, "");
  ASSERT_EQ(cfg.warnings.size(), 2u);
  EXPECT_EQ(cfg.warnings[0], "x86/unittests.cfg:2: 'Accel' is not a key run_tests.sh reads; ignored");
  EXPECT_EQ(cfg.warnings[1], "x86/unittests.cfg:3: 'foo' is not a key run_tests.sh reads; ignored");
}

TEST(KutConfigTest, ExtraParamsAndQemuParamsAreOneKeyTheLastWins) {
  const auto cfg = parse_kut_config("[a]\nqemu_params = -m 1\nextra_params = -m 2\n", "c");
  EXPECT_EQ(cfg.entries[0].params, "-m 2");
}

TEST(KutConfigTest, TripleQuotedParamsJoinLinesAndContinueOnABackslash) {
  const auto cfg = parse_kut_config(
      "[a]\nqemu_params = \"\"\"-m 1\n  -cpu max \\\n,+x\n-smp 2\"\"\"\nfile = a.flat\n", "c");
  ASSERT_EQ(cfg.entries.size(), 1u);
  EXPECT_EQ(cfg.entries[0].params, "-m 1\n-cpu max ,+x\n-smp 2");
  EXPECT_EQ(cfg.entries[0].file, "a.flat");
}

TEST(KutConfigTest, TheLastLineWithoutANewlineIsNotRead) {
  const auto cfg = parse_kut_config("[a]\nfile = a.flat\nsmp = 3", "c");
  ASSERT_EQ(cfg.entries.size(), 1u);
  EXPECT_EQ(cfg.entries[0].smp, "1");
}

TEST(KutConfigTest, EmptyNamesAndKeysBeforeTheFirstHeaderAreDropped) {
  const auto cfg = parse_kut_config("file = x.flat\n[]\nfile = y.flat\n[a]\n", "c");
  ASSERT_EQ(cfg.entries.size(), 1u);
  EXPECT_EQ(cfg.entries[0].name, "a");
  EXPECT_EQ(cfg.entries[0].file, "");
}

TEST(KutConfigTest, NameIsBetweenTheOutermostBrackets) {
  const auto cfg = parse_kut_config("[a [b] c]\n", "c");
  ASSERT_EQ(cfg.entries.size(), 1u);
  EXPECT_EQ(cfg.entries[0].name, "a [b] c");
}

TEST(KutConfigTest, OnlyTheLastEntryLosesItsDisabledIf) {
  const auto cfg = parse_kut_config("[a]\ndisabled_if = true\n[b]\ndisabled_if = true\n", "c");
  ASSERT_EQ(cfg.entries.size(), 2u);
  EXPECT_EQ(cfg.entries[0].disabled_if, "true");
  EXPECT_EQ(cfg.entries[1].disabled_if, "") << "the suite's reader passes it one argument short";
}

TEST(KutConfigTest, CommandTextIsSmpThenAppendThenParams) {
  minivmm::testrun::KutEntry e;
  EXPECT_EQ(kut_command_text(e), "-smp 1");
  e.smp = "$MAX_SMP";
  e.has_test_args = true;
  e.test_args = "\"10000000 `date +%s`\"";
  e.params = "-cpu max";
  EXPECT_EQ(kut_command_text(e), "-smp $MAX_SMP -append \"10000000 `date +%s`\" -cpu max");
  e.has_test_args = true;
  e.test_args = "";
  e.params = "";
  EXPECT_EQ(kut_command_text(e), "-smp $MAX_SMP -append ");
}

TEST(FindWordTest, WholeWordsSeparatedBySingleSpaces) {
  EXPECT_TRUE(find_word("vmx", "vmx nested_exception nodefault"));
  EXPECT_TRUE(find_word("nodefault", "vmx nested_exception nodefault"));
  EXPECT_FALSE(find_word("vm", "vmx"));
  EXPECT_FALSE(find_word("b", "a\tb")) << "a tab is no separator to the suite";
  EXPECT_FALSE(find_word("a", ""));
}

}  // namespace
