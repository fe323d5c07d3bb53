// The TOML manifest: what a test becomes, the defaults, ${NAME}, and one line naming the file
// and line for each kind of mistake.
#include "vmm/testrun/manifest.h"

#include <gtest/gtest.h>

namespace {

using minivmm::testrun::ManifestError;
using minivmm::testrun::TestCase;

std::vector<TestCase> parse(const std::string& text,
                            std::map<std::string, std::string> defines = {{"build", "/b"}}) {
  return minivmm::testrun::parse_manifest(
      text, "/m/boot.toml", defines, [](const std::string& n) -> std::optional<std::string> {
        if (n == "HOME_GUESTS") return std::string("/home/g");
        return std::nullopt;
      });
}

// The error `text` gets, "" if none.
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "";
}

// A test that starts from a snapshot: `minivmm run --restore S`, with `resets` rounds through
// --reset-on-exit; a default kernel does not apply to it, while the defaults' other keys do.
TEST(ManifestTest, ARestoredTestRunsItsSnapshotInRounds) {
  const auto tests = parse(R"(
[defaults]
kernel = "/k.bin"
args = ["--pit-tick", "loop"]
[[test]]
name = "rounds"
restore = "snaps/s0"
resets = 3
exit = 1
[[test]]
name = "booted"
exit = 1
)");
  ASSERT_EQ(tests.size(), 2u);
  EXPECT_EQ(tests[0].kernel, "/m/snaps/s0") << "the snapshot is the input a test start checks";
  EXPECT_EQ(tests[0].run_args,
            (std::vector<std::string>{"--restore", "/m/snaps/s0", "--no-console-input", "--quiet",
                                      "--reset-on-exit", "3", "--pit-tick", "loop"}));
  EXPECT_EQ(tests[1].run_args[0], "--kernel");
}

TEST(ManifestTest, ATestWithEveryKey) {
  const auto tests = parse(R"(
[[test]]
name = "pit"
kernel = "${build}/guest/minivmm-guest.bin"
initrd = "initrd.img"
cmdline = "timer=pit hz=250 ticks=250"
cpus = 2
memory = "128M"
args = ["--pit-tick", "loop"]
timeout = 20
exit = 1
console = ["done 250"]
not_console = ["exception", "Kernel panic"]
groups = ["timers", "pit"]
)");
  ASSERT_EQ(tests.size(), 1u);
  const TestCase& t = tests[0];
  EXPECT_EQ(t.name, "pit");
  EXPECT_EQ(t.origin, "/m/boot.toml:2");
  EXPECT_EQ(t.kernel, "/b/guest/minivmm-guest.bin");
  EXPECT_EQ(t.run_args,
            (std::vector<std::string>{"--kernel", "/b/guest/minivmm-guest.bin", "--no-console-input",
                                      "--quiet", "--initrd", "/m/initrd.img", "--cmdline",
                                      "timer=pit hz=250 ticks=250", "--cpus", "2", "--memory",
                                      "128M", "--pit-tick", "loop"}));
  EXPECT_EQ(t.timeout_s, 20.0);
  EXPECT_EQ(t.timeout_text, "20s");
  EXPECT_EQ(t.expect.exit_status, 1);
  EXPECT_EQ(t.expect.console_has, std::vector<std::string>{"done 250"});
  EXPECT_EQ(t.expect.console_lacks, (std::vector<std::string>{"exception", "Kernel panic"}));
  EXPECT_EQ(t.groups, (std::vector<std::string>{"timers", "pit"}));
}

TEST(ManifestTest, DefaultsApplyUnlessATestSetsItsOwn) {
  const auto tests = parse(R"(
[defaults]
kernel = "/k.bin"
exit = 1
timeout = 0.5
memory = 256
[[test]]
name = "a"
[[test]]
name = "b"
exit = 3
timeout = 0
console = "one line"
)");
  ASSERT_EQ(tests.size(), 2u);
  EXPECT_EQ(tests[0].kernel, "/k.bin");
  EXPECT_EQ(tests[0].expect.exit_status, 1);
  EXPECT_EQ(tests[0].timeout_s, 0.5);
  EXPECT_EQ(tests[0].timeout_text, "0.5s");
  EXPECT_EQ(tests[0].run_args.back(), "256M") << "a number is MiB";
  EXPECT_EQ(tests[1].expect.exit_status, 3);
  EXPECT_FALSE(tests[1].timeout_s) << "0 is no timeout";
  EXPECT_EQ(tests[1].expect.console_has, std::vector<std::string>{"one line"});
}

TEST(ManifestTest, NoTimeoutGivenIsSixtySeconds) {
  const auto tests = parse("[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 0\n");
  EXPECT_EQ(tests[0].timeout_s, 60.0);
}

TEST(ManifestTest, RelativePathsAreTheManifestsUnlessTheyStartWithAName) {
  const auto tests = parse(
      "[[test]]\nname = \"a\"\nkernel = \"${rel}/k\"\ninitrd = \"i/${rel}\"\nexit = 0\n",
      {{"rel", "build"}});
  EXPECT_EQ(tests[0].kernel, "build/k") << "as given on the command line";
  EXPECT_EQ(tests[0].run_args[5], "/m/i/build") << "written relative: the manifest's folder";
}

TEST(ManifestTest, NamesComeFromDefinesThenTheEnvironment) {
  const auto tests = parse(
      "[[test]]\nname = \"a\"\nkernel = \"${HOME_GUESTS}/k\"\ncmdline = \"x=${build}\"\nexit = 0\n");
  EXPECT_EQ(tests[0].kernel, "/home/g/k");
  EXPECT_EQ(tests[0].run_args[4], "--cmdline");
  EXPECT_EQ(tests[0].run_args[5], "x=/b");
}

struct Bad {
  const char* text;
  const char* error;
};

class ManifestErrorTest : public ::testing::TestWithParam<Bad> {};

TEST_P(ManifestErrorTest, NamesTheFileAndLine) {
  EXPECT_EQ(error_of(GetParam().text), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, ManifestErrorTest,
    ::testing::Values(
        Bad{"[[test]]\nname = \"a\nkernel = \"k\"\n",
            "/m/boot.toml:2:10: Error while parsing string: unescaped control characters other "
            "than TAB (U+0009) are explicitly prohibited"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\ntimeuot = 5\n",
            "/m/boot.toml:5: unknown key 'timeuot' in [[test]]"},
        Bad{"[defaults]\nname = \"x\"\n[[test]]\nname = \"a\"\n",
            "/m/boot.toml:2: unknown key 'name' in [defaults]"},
        Bad{"title = \"x\"\n[[test]]\nname = \"a\"\n",
            "/m/boot.toml:1: unknown key 'title' (a manifest has [defaults] and [[test]] tables)"},
        Bad{"[defaults]\nexit = 1\n", "/m/boot.toml:1: no tests: a manifest has one [[test]] table per test"},
        Bad{"[[test]]\nkernel = \"/k\"\nexit = 1\n", "/m/boot.toml:1: a test without a 'name'"},
        Bad{"[[test]]\nname = \"a b\"\nkernel = \"/k\"\nexit = 1\n",
            "/m/boot.toml:2: a test's name is not empty and has no blanks or '/': 'a b'"},
        Bad{"[[test]]\nname = \"a\"\nexit = 1\n", "/m/boot.toml:1: test 'a' has no 'kernel' (or 'restore')"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nrestore = \"/s\"\nexit = 1\n",
            "/m/boot.toml:3: test 'a' has both 'kernel' and 'restore'"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nresets = 2\nexit = 1\n",
            "/m/boot.toml:4: 'resets' is for a test that starts from a snapshot ('restore')"},
        Bad{"[[test]]\nname = \"a\"\nrestore = \"/s\"\ncmdline = \"x\"\nexit = 1\n",
            "/m/boot.toml:4: 'cmdline': a restored guest is not booted (the snapshot says what it "
            "has); test 'a'"},
        Bad{"[[test]]\nname = \"a\"\nrestore = \"/s\"\nresets = 0\nexit = 1\n",
            "/m/boot.toml:4: 'resets' must be from 1 to 1000000, not 0"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\n",
            "/m/boot.toml:1: test 'a' asserts nothing: give it the 'exit' status that passes"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\ntimeout = -1\n",
            "/m/boot.toml:5: 'timeout' must be 0 (none) or a positive number of seconds"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\ntimeout = nan\n",
            "/m/boot.toml:5: 'timeout' must be 0 (none) or a positive number of seconds"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\ntimeout = inf\n",
            "/m/boot.toml:5: 'timeout' must be 0 (none) or a positive number of seconds"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\nmemory = \"lots\"\n",
            "/m/boot.toml:5: 'memory': 'lots' is not a size (try \"64M\" or \"1G\")"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\nmemory = 0\n",
            "/m/boot.toml:5: 'memory' must be from 1 to 3072, not 0"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\ntimeout = \"5\"\n",
            "/m/boot.toml:5: 'timeout' must be a number of seconds"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 256\n",
            "/m/boot.toml:4: 'exit' must be from 0 to 255, not 256"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\ncpus = 17\n",
            "/m/boot.toml:5: 'cpus' must be from 1 to 16, not 17"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\nargs = [\"--x\", 1]\n",
            "/m/boot.toml:5: 'args' must hold strings only"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"${nope}/k\"\nexit = 1\n",
            "/m/boot.toml:3: ${nope} is not defined (--define nope=VALUE, or an environment variable)"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\n[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\n",
            "/m/boot.toml:5: a second test named 'a'"},
        Bad{"[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\nconsole = [\"\"]\n",
            "/m/boot.toml:1: an empty 'console' line matches every console"},
        Bad{"test = 5\n", "/m/boot.toml:1: 'test' must be [[test]] tables"}));

TEST(ManifestTest, AMissingFileIsAManifestError) {
  try {
    minivmm::testrun::load_manifest("/nonexistent/boot.toml", {});
    FAIL() << "no error";
  } catch (const ManifestError& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/boot.toml: cannot read: No such file or directory");
  }
}

}  // namespace
