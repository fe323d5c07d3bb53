// The shell's word splitting for the suite's values: quotes, expansions, substitutions,
// comments and globs, with the callbacks wired to tables.
#include "vmm/testrun/shell_words.h"

#include <gtest/gtest.h>

#include <map>

namespace {

using minivmm::testrun::ShellContext;
using Words = std::vector<std::string>;

struct FakeShell {
  std::map<std::string, std::string> vars{{"MAX_SMP", "2"}, {"TWO", "a b"}};
  std::map<std::string, std::string> commands{{"date +%s", "1700000000\n"}, {"echo x y", "x y\n\n"}};
  std::map<std::string, Words> globs{{"x86/*.flat", {"x86/a.flat", "x86/b.flat"}}};
  std::vector<std::string> ran;
  std::vector<std::string> globbed;

  ShellContext context() {
    ShellContext c;
    c.variable = [this](std::string_view n) -> std::optional<std::string> {
      auto it = vars.find(std::string(n));
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
    c.command_output = [this](std::string_view cmd) {
      ran.emplace_back(cmd);
      return commands[std::string(cmd)];
    };
    c.glob = [this](std::string_view p) {
      globbed.emplace_back(p);
      return globs[std::string(p)];
    };
    return c;
  }

  Words split(std::string_view text) {
    std::string error;
    auto w = minivmm::testrun::shell_words(text, context(), error);
    EXPECT_TRUE(w.has_value()) << error;
    return w.value_or(Words{"<error: " + error + ">"});
  }
};

struct WordsCase {
  const char* text;
  Words want;
};

class ShellWordsTest : public ::testing::TestWithParam<WordsCase> {};

TEST_P(ShellWordsTest, SplitsAsBash) {
  FakeShell sh;
  EXPECT_EQ(sh.split(GetParam().text), GetParam().want) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    Grammar, ShellWordsTest,
    ::testing::Values(
        WordsCase{"-smp 1 -append 'cpuid'", {"-smp", "1", "-append", "cpuid"}},
        WordsCase{"  -cpu   qemu64,+x2apic \t", {"-cpu", "qemu64,+x2apic"}},
        WordsCase{"-append \"a b  c\"", {"-append", "a b  c"}},
        WordsCase{"-append \"10000000 `date +%s`\"", {"-append", "10000000 1700000000"}},
        WordsCase{"-append $(echo x y)", {"-append", "x", "y"}},
        WordsCase{"-append \"$(echo x y)\"", {"-append", "x y"}},
        WordsCase{"-smp $MAX_SMP", {"-smp", "2"}},
        WordsCase{"-smp ${MAX_SMP}x", {"-smp", "2x"}},
        WordsCase{"$TWO", {"a", "b"}},
        WordsCase{"\"$TWO\"", {"a b"}},
        WordsCase{"x$UNSET y", {"x", "y"}},
        WordsCase{"$UNSET", {}},
        WordsCase{"''", {""}},
        WordsCase{"a''b", {"ab"}},
        WordsCase{"a\\ b", {"a b"}},
        WordsCase{"\"a\\\"b\\$c\\d\"", {"a\"b$c\\d"}},
        WordsCase{"'$TWO `x`'", {"$TWO `x`"}},
        WordsCase{"$'a\\nb'", {"a\nb"}},
        WordsCase{"cost $ 5", {"cost", "$", "5"}},
        // A comment starts only at a word's start, and takes the rest of the text.
        WordsCase{"-append x # -cpu max", {"-append", "x"}},
        WordsCase{"a#b", {"a#b"}},
        WordsCase{"\"#\" x", {"#", "x"}},
        WordsCase{"-m 1\n-cpu max", {"-m", "1", "-cpu", "max"}},
        // An unquoted glob that matches is replaced by its files; one that does not stays.
        WordsCase{"x86/*.flat", {"x86/a.flat", "x86/b.flat"}},
        WordsCase{"ept_access*", {"ept_access*"}},
        WordsCase{"\"ept_access*\"", {"ept_access*"}}));

TEST(ShellWordsGlobTest, QuotedGlobCharactersAreEscapedInThePattern) {
  FakeShell sh;
  sh.split("'a*'b* \"[x\"? plain");
  EXPECT_EQ(sh.globbed, (Words{"a\\*b*", "\\[x?"})) << "quoted parts escaped, a plain word not globbed";
}

TEST(ShellWordsGlobTest, QuotedGlobIsNeverAsked) {
  FakeShell sh;
  sh.split("\"ept_access*\" '*'");
  EXPECT_TRUE(sh.globbed.empty());
}

TEST(ShellWordsTest, CommandsRunOnlyWhereTheTextHasThem) {
  FakeShell sh;
  sh.split("-append 'cpuid' -cpu max");
  EXPECT_TRUE(sh.ran.empty());
  sh.split("-append \"1 `date +%s`\"");
  EXPECT_EQ(sh.ran, Words{"date +%s"});
}

TEST(ShellWordsTest, UnterminatedQuotesAreErrors) {
  FakeShell sh;
  for (const char* bad : {"'a", "\"a", "`a", "$(a", "${a", "$'a"}) {
    std::string error;
    EXPECT_FALSE(minivmm::testrun::shell_words(bad, sh.context(), error)) << bad;
    EXPECT_NE(error.find("unterminated"), std::string::npos) << bad << ": " << error;
  }
}

}  // namespace
