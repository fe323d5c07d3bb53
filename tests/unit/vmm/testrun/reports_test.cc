// The TAP and JUnit reports (vmm/testrun/reports.h) of tests with hostile names and consoles
// (issue 31's attack on `minivmm test`): a kvm-unit-tests cfg names a test anything between
// its brackets, and a guest writes any bytes. Each report is read back by real parsers: the
// TAP one by tests/testrun/check_tap.py (strict, YAML blocks through PyYAML, and tappy when
// installed), the JUnit one by python's XML parser and by junitparser (check_junit.py).
#include "vmm/testrun/reports.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace minivmm::testrun {
namespace {

std::string testrun_dir() { return std::string(MINIVMM_TESTS_DIR) + "/testrun"; }

std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string write_temp(const std::string& text) {
  char tmpl[] = "/tmp/minivmm-report-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  return tmpl;
}

// Names a cfg's `[...]` can hold: markup, TAP's '#' and '\', a path's '/' and '..', control
// characters, UTF-8 and bytes that are none.
const std::vector<std::string> kHostileNames{
    "plain",       "a<b>&\"c'd",     "x # SKIP not really", "x#TODO",     "back\\slash",
    "../../etc",   "dot..dot",       "tab\there",           "cr\rhere",   "ctl\x01\x7f",
    "\xc3\xbcnicode", "bad\xff\xfeutf8", "c1\xc2\x80" "ctl",       "]]>",        ""};

struct Fixture {
  std::vector<TestCase> tests;
  std::vector<TestResult> results;
  std::vector<std::string> suites;
};

Fixture hostile() {
  Fixture f;
  for (std::size_t i = 0; i < kHostileNames.size(); ++i) {
    TestCase t;
    t.name = kHostileNames[i];
    t.origin = "x86/unittests.cfg:" + std::to_string(i + 1);
    f.tests.push_back(t);
    TestResult r;
    r.index = i;
    r.duration_s = 0.5;
    const Outcome o = i % 3 == 0 ? Outcome::kPass : i % 3 == 1 ? Outcome::kFail : Outcome::kSkip;
    // A reason and a console with what a guest writes: a first line that starts with blanks
    // (YAML guessed the block's indentation from it), escape codes, DEL, invalid UTF-8, a NUL.
    r.verdict = {o, o == Outcome::kPass ? "" : "reason # with\na newline & <markup> \xff"};
    r.console_tail = std::string("   indented first line\nsecond\n\x1b[31mred\x1b[0m\n") +
                     "del\x7f bad\xff\xfe c1\xc2\x9f nul" + std::string(1, '\0') + "end\n";
    f.results.push_back(r);
    f.suites.push_back(i % 2 ? "kvm-unit-tests" : "a&b<c>");
  }
  return f;
}

TEST(ReportsTest, TapDescriptionsEscapeDirectivesAndHoldNoLineBreak) {
  const Fixture f = hostile();
  const std::string tap = tap_report(f.tests, f.results);
  // '#' in a name is TAP's `\#`: `x # SKIP not really` is not a skipped test.
  EXPECT_NE(tap.find("ok 3 - x \\# SKIP not really # SKIP reason"), std::string::npos) << tap;
  EXPECT_NE(tap.find(" - back\\\\slash"), std::string::npos) << tap;
  EXPECT_EQ(tap.find('\r'), std::string::npos);
  EXPECT_NE(tap.find("  console: |2\n    " "   indented first line\n"), std::string::npos) << tap;
}

TEST(ReportsTest, TapOfHostileNamesAndConsolesIsReadByRealParsers) {
  const Fixture f = hostile();
  const std::string path = write_temp(tap_report(f.tests, f.results));
  std::string cmd = "/usr/bin/python3 " + testrun_dir() + "/check_tap.py " + sh_quote(path);
  for (std::size_t i = 0; i < f.tests.size(); ++i) {
    // The expectation as check_tap.py compares it: control characters as '?', and bytes that
    // are no UTF-8 replaced the same way (the report is valid UTF-8).
    std::string shown;
    for (std::size_t k = 0; k < f.tests[i].name.size(); ++k) {
      const auto b = static_cast<unsigned char>(f.tests[i].name[k]);
      if (b == 0xc3) {  // ü: kept whole
        shown += f.tests[i].name.substr(k, 2);
        ++k;
      } else if (b == 0xc2) {  // a C1 control: one '?'
        shown += '?';
        ++k;
      } else {
        shown += b < 0x20 || b == 0x7f || b >= 0x80 ? '?' : static_cast<char>(b);
      }
    }
    const char* verdict = f.results[i].verdict.outcome == Outcome::kPass   ? "PASS"
                          : f.results[i].verdict.outcome == Outcome::kFail ? "FAIL"
                                                                           : "SKIP";
    cmd += " " + sh_quote(shown + "=" + verdict);
  }
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ::unlink(path.c_str());
}

TEST(ReportsTest, JunitOfHostileNamesAndConsolesIsWellFormedXml) {
  const Fixture f = hostile();
  const std::string path = write_temp(junit_report(f.tests, f.results, f.suites, 1.5));
  EXPECT_EQ(std::system(("/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; "
                         "E.parse(sys.argv[1])' " + sh_quote(path))
                            .c_str()),
            0);
  // junitparser finds every test once (names as the XML holds them: check_junit.py compares
  // them itself, so here only the count).
  const std::string count =
      "/usr/bin/python3 -c 'import sys; from junitparser import JUnitXml; "
      "n = sum(1 for s in JUnitXml.fromfile(sys.argv[1]) for c in s); sys.exit(0 if n == " +
      std::to_string(f.tests.size()) + " else 1)' " + sh_quote(path);
  EXPECT_EQ(std::system(count.c_str()), 0);
  ::unlink(path.c_str());
}

TEST(ReportsTest, ResultsTsvKeepsOneLinePerTest) {
  const Fixture f = hostile();
  const std::string tsv = results_tsv(f.tests, f.results);
  std::size_t lines = 0, tabs = 0;
  for (char c : tsv) {
    lines += c == '\n';
    tabs += c == '\t';
  }
  EXPECT_EQ(lines, f.tests.size() + 1) << tsv;
  EXPECT_EQ(tabs, 5 * (f.tests.size() + 1)) << tsv;
}

TEST(ReportsTest, LogFileStemsStayInTheLogsFolderAndFitAFileName) {
  EXPECT_EQ(log_file_stem("../../etc"), ".._.._etc");
  EXPECT_EQ(log_file_stem(".."), "_..");
  EXPECT_EQ(log_file_stem(""), "_");
  // NAME_MAX is 255 bytes: the stem leaves room for ".stderr" and a ".N" of uniqueness.
  EXPECT_LE(log_file_stem(std::string(5000, 'x')).size(), 200u);
}

}  // namespace
}  // namespace minivmm::testrun
