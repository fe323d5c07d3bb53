// The spec the VMM writes, read by the init's own parser (guest/exec_init/spec.c, compiled in).
#include "vmm/exec/exec_spec.h"

#include <gtest/gtest.h>

#include <cstring>

extern "C" {
#include "guest/exec_init/exec_init.h"
}

namespace minivmm::vmm::exec {
namespace {

TEST(ExecSpec, RoundTripThroughTheInitsParser) {
  ExecSpec s;
  s.argv = {"sh", "-c", "exit 7", ""};
  s.env = {"PATH=/bin", "HOME=/root"};
  s.cwd = "/work/x y";
  s.root_tag = "minivmm-root";
  s.shares = {{"t0", "/srv/a", false}, {"t1", "/srv/b", true}};
  std::string why;
  auto bytes = encode_spec(s, why);
  ASSERT_TRUE(bytes) << why;
  auto* parsed = new exec_spec;
  ASSERT_EQ(parse_exec_spec(reinterpret_cast<char*>(bytes->data()), bytes->size(), parsed), 0)
      << parsed->error;
  EXPECT_STREQ(parsed->argv[0], "sh");
  EXPECT_STREQ(parsed->argv[2], "exit 7");
  EXPECT_STREQ(parsed->argv[3], "");
  EXPECT_EQ(parsed->argv[4], nullptr);
  EXPECT_STREQ(parsed->env[1], "HOME=/root");
  EXPECT_STREQ(parsed->cwd, "/work/x y");
  EXPECT_STREQ(parsed->stderr_dev, "/dev/hvc1");
  ASSERT_EQ(parsed->shares, 2);
  EXPECT_STREQ(parsed->share[1].path, "/srv/b");
  EXPECT_EQ(parsed->share[0].read_only, 0);
  EXPECT_EQ(parsed->share[1].read_only, 1);
  delete parsed;
}

TEST(ExecSpec, NulInAnArgumentIsRefused) {
  ExecSpec s;
  s.argv = {std::string("a\0b", 3)};
  std::string why;
  EXPECT_FALSE(encode_spec(s, why));
  s.argv.clear();
  EXPECT_FALSE(encode_spec(s, why));
}

TEST(ExecSpec, InitRefusesMalformedSpecs) {
  auto* parsed = new exec_spec;
  const auto parse = [&](std::string text) {
    return parse_exec_spec(text.data(), text.size(), parsed);
  };
  using namespace std::string_literals;
  EXPECT_NE(parse("arg\0true"s), 0);                       // not NUL-terminated
  EXPECT_NE(parse("arg\0true\0"s), 0);                     // no cwd, root, consoles
  EXPECT_NE(parse("bogus\0x\0"s), 0);                      // unknown key
  EXPECT_NE(parse("share\0t\0"s), 0);                      // cut short
  EXPECT_NE(parse("env\0NOEQUALS\0"s), 0);
  EXPECT_NE(parse("share\0t\0relative\0rw\0"s), 0);
  EXPECT_NE(parse(""s), 0);
  EXPECT_EQ(parse("arg\0true\0cwd\0/\0root\0r\0stdout\0/o\0stderr\0/e\0"s), 0) << parsed->error;
  delete parsed;
}

TEST(ExecEnvironment, KeepsTheDocumentedSubset) {
  char a[] = "PATH=/usr/bin", b[] = "HOME=/h", c[] = "SSH_AUTH_SOCK=/x", d[] = "LC_ALL=C",
       e[] = "DISPLAY=:0", f[] = "TERM=xterm";
  char* env[] = {a, b, c, d, e, f, nullptr};
  const auto out = exec_environment(env);
  EXPECT_EQ(out, (std::vector<std::string>{"PATH=/usr/bin", "HOME=/h", "LC_ALL=C", "TERM=xterm",
                                           "MINIVMM_EXEC=1"}));
  char* none[] = {nullptr};
  EXPECT_EQ(exec_environment(none).front().rfind("PATH=", 0), 0u);
}

}  // namespace
}  // namespace minivmm::vmm::exec
