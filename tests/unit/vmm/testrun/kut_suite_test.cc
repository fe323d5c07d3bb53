// kvm-unit-tests' selection and probe rules, in the suite's order, and its environment module.
#include "vmm/testrun/kut_suite.h"

#include <gtest/gtest.h>

#include <map>

namespace {

using minivmm::testrun::kut_environment;
using minivmm::testrun::kut_timeout_text;
using minivmm::testrun::KutEntry;
using minivmm::testrun::KutEnvInputs;
using minivmm::testrun::KutHost;
using minivmm::testrun::KutLaunch;
using minivmm::testrun::KutSelection;
using minivmm::testrun::Outcome;
using minivmm::testrun::parse_duration;
using minivmm::testrun::prepare_kut_run;
using minivmm::testrun::Selected;
using minivmm::testrun::Selection;
using minivmm::testrun::select_kut_entry;
using minivmm::testrun::ShellContext;
using minivmm::testrun::Verdict;

struct FakeKutHost {
  std::map<std::string, std::string> files{
      {"/sys/module/kvm/parameters/enable_pmu", "N"},
      {"/proc/sys/kernel/nmi_watchdog", "0"},
      {"/sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc"}};
  std::map<std::string, bool> kernels{{"x86/apic.flat", true}, {"x86/vmexit.flat", true}};
  bool kvm = true;
  std::vector<std::string> conditions;

  KutHost host() {
    KutHost h;
    h.kvm_available = kvm;
    h.read_file = [this](const std::string& p) -> std::optional<std::string> {
      auto it = files.find(p);
      if (it == files.end()) return std::nullopt;
      return it->second;
    };
    h.is_file = [this](const std::string& p) { return kernels.count(p) > 0; };
    h.disabled = [this](const std::string& c) {
      conditions.push_back(c);
      return c == "true";
    };
    return h;
  }
};

KutEntry entry(std::string name, std::string file = "apic.flat") {
  KutEntry e;
  e.name = std::move(name);
  e.file = std::move(file);
  return e;
}

Selection select_entry(const KutEntry& e, const KutSelection& s = {}) {
  FakeKutHost h;
  return select_kut_entry(e, s, h.host());
}

TEST(KutSelectTest, RunsByDefault) {
  EXPECT_EQ(select_entry(entry("a")).what, Selected::kRun);
}

TEST(KutSelectTest, NamesAndGroupsFilterSilently) {
  KutSelection names;
  names.names = {"b"};
  EXPECT_EQ(select_entry(entry("a"), names).what, Selected::kNo);
  KutSelection group;
  group.group = "vmexit";
  KutEntry e = entry("a");
  e.groups = "apic";
  EXPECT_EQ(select_entry(e, group).what, Selected::kNo);
  e.groups = "apic vmexit";
  EXPECT_EQ(select_entry(e, group).what, Selected::kRun);
  EXPECT_EQ(select_entry(entry("")).what, Selected::kNo);
}

TEST(KutSelectTest, NodefaultSkipsUnlessAllOrAnyGroup) {
  KutEntry e = entry("vmx_pf_vpid_test");
  e.groups = "vmx nested_exception nodefault";
  EXPECT_EQ(select_entry(e).reason, "test marked as manual run only");
  KutSelection named;
  named.names = {"vmx_pf_vpid_test"};
  EXPECT_EQ(select_entry(e, named).what, Selected::kSkip) << "naming it is not enough";
  KutSelection all;
  all.all = true;
  EXPECT_EQ(select_entry(e, all).what, Selected::kRun);
  KutSelection vmx;
  vmx.group = "vmx";
  EXPECT_EQ(select_entry(e, vmx).what, Selected::kRun) << "any -g turns the rule off";
}

TEST(KutSelectTest, SkipReasonsInTheSuitesOrder) {
  KutEntry e = entry("t", "missing.flat");
  e.groups = "pv-host nodefault";
  e.arch = "i386";
  e.check = "/sys/module/kvm/parameters/enable_pmu=Y";
  EXPECT_EQ(select_entry(e).reason, "no gen-se-header available for pv-host test");
  e.groups = "nodefault";
  EXPECT_EQ(select_entry(e).reason, "test marked as manual run only");
  e.groups = "";
  EXPECT_EQ(select_entry(e).reason, "i386 only");
  e.arch = "x86_64";
  EXPECT_EQ(select_entry(e).reason, "/sys/module/kvm/parameters/enable_pmu not equal to Y");
  e.check = "";
  EXPECT_EQ(select_entry(e).reason, "Test file 'x86/missing.flat' not found");
  e.file = "";
  EXPECT_EQ(select_entry(e).reason, "Test file '' not found");
}

TEST(KutSelectTest, EveryCheckMustHoldAndTheFirstFailureIsNamed) {
  KutEntry e = entry("pmu");
  e.check = "/proc/sys/kernel/nmi_watchdog=0 /sys/module/kvm/parameters/enable_pmu=Y /nope=1";
  EXPECT_EQ(select_entry(e).reason, "/sys/module/kvm/parameters/enable_pmu not equal to Y");
  e.check = "/sys/devices/system/clocksource/clocksource0/current_clocksource=tsc";
  EXPECT_EQ(select_entry(e).what, Selected::kRun);
  e.check = "/nope=1";
  EXPECT_EQ(select_entry(e).reason, "/nope not equal to 1") << "a missing file reads as not equal";
  e.check = "/proc/sys/kernel/nmi_watchdog";
  EXPECT_EQ(select_entry(e).reason, "/proc/sys/kernel/nmi_watchdog not equal to /proc/sys/kernel/nmi_watchdog");
}

TEST(KutSelectTest, DisabledIfIsAskedOnlyWhenSet) {
  FakeKutHost h;
  KutEntry e = entry("a");
  EXPECT_EQ(select_kut_entry(e, {}, h.host()).what, Selected::kRun);
  EXPECT_TRUE(h.conditions.empty());
  e.disabled_if = "true";
  EXPECT_EQ(select_kut_entry(e, {}, h.host()).reason, "disabled because: true");
  e.disabled_if = "false";
  EXPECT_EQ(select_kut_entry(e, {}, h.host()).what, Selected::kRun);
}

ShellContext no_shell() {
  ShellContext c;
  c.variable = [](std::string_view) { return std::nullopt; };
  c.command_output = [](std::string_view) { return std::string(); };
  c.glob = [](std::string_view) { return std::vector<std::string>(); };
  return c;
}

std::variant<KutLaunch, Verdict> prepare_entry(const KutEntry& e, bool kvm = true, std::string env_error = "") {
  FakeKutHost h;
  h.kvm = kvm;
  return prepare_kut_run(e, h.host(), no_shell(), "/suite", "/logs/env", env_error);
}

TEST(KutPrepareTest, BuildsTheMinivmmCommandLine) {
  KutEntry e = entry("vmexit_cpuid", "vmexit.flat");
  e.has_test_args = true;
  e.test_args = "'cpuid'";
  e.params = "-cpu max,vendor=GenuineIntel";
  const auto p = prepare_entry(e);
  ASSERT_TRUE(std::holds_alternative<KutLaunch>(p));
  const auto& l = std::get<KutLaunch>(p);
  EXPECT_EQ(l.run_args,
            (std::vector<std::string>{"--kernel", "/suite/x86/vmexit.flat", "--cpus", "1", "--memory",
                                      "128M", "--cpu", "host", "--no-console-input", "--quiet",
                                      "--log-level", "error", "--testdev", "--cmdline", "cpuid",
                                      "--initrd", "/logs/env", "--lost-ticks", "discard"}));
  EXPECT_EQ(l.warnings, "minivmm test: warning: -cpu: property 'vendor=GenuineIntel' ignored\n");
}

Verdict skipped(const std::variant<KutLaunch, Verdict>& p) {
  EXPECT_TRUE(std::holds_alternative<Verdict>(p));
  return std::holds_alternative<Verdict>(p) ? std::get<Verdict>(p) : Verdict{};
}

TEST(KutPrepareTest, TheProbesFindingsAreSkips) {
  KutEntry e = entry("a");
  e.params = "-snapshot";
  EXPECT_EQ(skipped(prepare_entry(e)), (Verdict{Outcome::kSkip, "unsupported option '-snapshot'"}));
  e.params = "";
  e.accel = "tcg";
  EXPECT_EQ(skipped(prepare_entry(e)),
            (Verdict{Outcome::kSkip, "minivmm runs guests under KVM only (-machine accel=tcg)"}));
  e.accel = "kvm";
  EXPECT_EQ(skipped(prepare_entry(e, false)),
            (Verdict{Outcome::kSkip, "KVM is needed, but not available on this host"}));
  e.accel = "";
  EXPECT_EQ(skipped(prepare_entry(e, false)).detail,
            "minivmm runs guests under KVM only (-machine accel=tcg)")
      << "no accel and no KVM: x86/run picks TCG";
  EXPECT_EQ(skipped(prepare_entry(e, true, "/s/errata.txt not found. (ERRATATXT=/s/errata.txt)")).detail,
            "/s/errata.txt not found. (ERRATATXT=/s/errata.txt)");
  e.params = "-append 'x";
  EXPECT_EQ(skipped(prepare_entry(e)).detail,
            "cannot split the cfg's values into words: unterminated single quote");
}

TEST(KutPrepareTest, AccelPropertiesReachTheMachineOption) {
  KutEntry e = entry("a");
  e.accel = "kvm,foo=1";
  const auto p = prepare_entry(e);
  ASSERT_TRUE(std::holds_alternative<KutLaunch>(p));
  EXPECT_EQ(std::get<KutLaunch>(p).warnings, "minivmm test: warning: -machine: 'foo=1' ignored\n");
}

TEST(KutTimeoutTest, OverrideThenCfgThenNinetySeconds) {
  KutEntry e = entry("a");
  EXPECT_EQ(kut_timeout_text(e, std::nullopt), "90s");
  e.timeout = "30";
  EXPECT_EQ(kut_timeout_text(e, std::nullopt), "30");
  EXPECT_EQ(kut_timeout_text(e, std::string("5m")), "5m");
}

TEST(DurationTest, AsTimeoutTakesThem) {
  EXPECT_EQ(parse_duration("90s"), 90.0);
  EXPECT_EQ(parse_duration("30"), 30.0);
  EXPECT_EQ(parse_duration("1.5m"), 90.0);
  EXPECT_EQ(parse_duration("2h"), 7200.0);
  EXPECT_EQ(parse_duration("1d"), 86400.0);
  EXPECT_EQ(parse_duration(".5"), 0.5);
  EXPECT_EQ(parse_duration("0"), 0.0);
  for (const char* bad : {"", "-1", "-1s", "s", "x", "1x", "1 s", "inf", "nan", "+5"}) {
    EXPECT_FALSE(parse_duration(bad)) << bad;
  }
}

TEST(KutEnvironmentTest, TheSuitesVariablesInItsOrder) {
  KutEnvInputs in;
  in.kernel_release = "6.18.44-fc-v1098";
  in.errata_path = "/s/errata.txt";
  in.errata_txt =
      "#----\n# commit : minimum kernel : summary\n"
      "9e3f7a296940    : 4.9                           : arm64: KVM: pmu\n"
      "7b6b46311a85    : 7.0                           : from the future\n"
      "aaaaaaaaaaaa    : 6.18.45                       : one sublevel later\n"
      "bbbbbbbbbbbb    : 6.18.44                       : this one\n";
  in.environ_errata = {"ERRATA_7b6b46311a85=y"};
  in.user_env = "MEMLIMIT=64\nTARGET=kvmtool\n  # no\nNR_CPUS=x\n";
  std::string error;
  const auto env = kut_environment(in, error);
  ASSERT_TRUE(env) << error;
  EXPECT_EQ(*env,
            "TARGET=\n"
            "QEMU_ACCEL=kvm\n"
            "QEMU_VERSION_STRING=QEMU emulator version 7.2.0 (minivmm test)\n"
            "QEMU_MAJOR=7\nQEMU_MINOR=2\nQEMU_MICRO=0\n"
            "KERNEL_VERSION_STRING=6.18.44-fc-v1098\n"
            "KERNEL_VERSION=6\nKERNEL_PATCHLEVEL=18\nKERNEL_SUBLEVEL=44\nKERNEL_EXTRAVERSION=\n"
            "MEMLIMIT=64\nNR_CPUS=x\n"
            "ERRATA_7b6b46311a85=y\n"
            "ERRATA_9e3f7a296940=y\n"
            "ERRATA_aaaaaaaaaaaa=n\n"
            "ERRATA_bbbbbbbbbbbb=y\n");
}

TEST(KutEnvironmentTest, ForceAndAnEmptyErrataList) {
  KutEnvInputs in;
  in.kernel_release = "5.10.0";
  std::string error;
  auto env = kut_environment(in, error);
  ASSERT_TRUE(env) << error;
  EXPECT_EQ(env->substr(env->size() - 3), "=\n\n") << "an empty line where no errata are";
  in.errata_force = true;
  env = kut_environment(in, error);
  ASSERT_TRUE(env);
  EXPECT_NE(env->find("\nERRATA_FORCE=y\n"), std::string::npos);
}

TEST(KutEnvironmentTest, AMissingOrBadErrataFileIsTheSuitesError) {
  KutEnvInputs in;
  in.kernel_release = "6.1.0";
  in.errata_path = "/s/errata.txt";
  std::string error;
  EXPECT_FALSE(kut_environment(in, error));
  EXPECT_EQ(error, "/s/errata.txt not found. (ERRATATXT=/s/errata.txt)");
  in.errata_txt = "abc : x.y : bad\n";
  EXPECT_FALSE(kut_environment(in, error));
  EXPECT_EQ(error, "Bad minimum kernel version in /s/errata.txt, x.y");
}

}  // namespace
