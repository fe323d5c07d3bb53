// A manifest test with `command = [...]`: `minivmm exec` per test, its options from the keys.
#include <gtest/gtest.h>

#include "vmm/testrun/manifest.h"

namespace {

using minivmm::testrun::ManifestError;
using minivmm::testrun::TestCase;

std::vector<TestCase> parse_exec(const std::string& text) {
  return minivmm::testrun::parse_manifest(
      text, "/m/ci.toml", {{"K", "/k/vmlinuz"}},
      [](const std::string&) -> std::optional<std::string> { return std::nullopt; });
}

std::string exec_error_of(const std::string& text) {
  try {
    parse_exec(text);
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "";
}

TEST(ExecManifest, CommandBecomesExecArguments) {
  const auto tests = parse_exec(R"(
[defaults]
kernel = "${K}"
modules = "/k/modules"
timeout = 300
[[test]]
name = "seven"
command = ["sh", "-c", "exit 7"]
share = ["out", "/data,ro"]
memory = "1G"
exit = 7
console = ["hello"]
)");
  ASSERT_EQ(tests.size(), 1u);
  EXPECT_EQ(tests[0].subcommand, "exec");
  EXPECT_EQ(tests[0].run_args,
            (std::vector<std::string>{"--kernel", "/k/vmlinuz", "--modules", "/k/modules",
                                      "--share", "/m/out", "--share", "/data,ro", "--memory",
                                      "1G", "--", "sh", "-c", "exit 7"}));
  EXPECT_EQ(tests[0].expect.exit_status, 7);
}

TEST(ExecManifest, KernelIsOptionalAndShareMayBeAString) {
  const auto tests = parse_exec(R"(
[[test]]
name = "t"
command = ["true"]
share = "/srv"
exit = 0
)");
  EXPECT_TRUE(tests[0].kernel.empty());
  EXPECT_EQ(tests[0].run_args, (std::vector<std::string>{"--share", "/srv", "--", "true"}));
}

TEST(ExecManifest, BootKeysAndEmptyCommandsAreErrors) {
  EXPECT_NE(exec_error_of("[[test]]\nname = \"t\"\ncommand = []\nexit = 0\n").find("'command' is empty"),
            std::string::npos);
  EXPECT_NE(exec_error_of("[[test]]\nname = \"t\"\ncommand = [\"true\"]\ncmdline = \"x\"\nexit = 0\n")
                .find("'cmdline' is not for a test that runs a 'command'"),
            std::string::npos);
  EXPECT_NE(exec_error_of("[[test]]\nname = \"t\"\nkernel = \"/k\"\nshare = \"/s\"\nexit = 0\n")
                .find("'share' is for a test that runs a 'command'"),
            std::string::npos);
}

TEST(ExecManifest, BootTestsStillRunRun) {
  const auto tests = parse_exec("[[test]]\nname = \"b\"\nkernel = \"/k\"\nexit = 0\n");
  EXPECT_EQ(tests[0].subcommand, "run");
  EXPECT_EQ(tests[0].run_args.front(), "--kernel");
}

}  // namespace
