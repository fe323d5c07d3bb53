// The reports `minivmm test` writes for CI, from the finished tests:
//  - TAP version 13: the plan, then one `ok`/`not ok` line per test in the order given, a SKIP
//    directive with its reason, and for a failure a YAML block with the reason, the time and
//    the console's last lines;
//  - JUnit XML: one <testsuite> per source (the cfg, each manifest), one <testcase> per test
//    with its time, a <failure> or <skipped> with the reason, and the console's last lines as
//    <system-out>; text is escaped and made valid XML 1.0 (a console holds escape codes and
//    any bytes a guest wrote);
//  - results.tsv in the logs folder: name, verdict, reason, the test's time, the VMM process's
//    own time and what the runner added (what scripts/bench_test_runner.sh reads).
// test_command.cc writes them through vmm::OutputFile (vmm/host/output_file.h), as every file
// minivmm writes.
#pragma once

#include <string>
#include <vector>

#include "vmm/testrun/runner.h"
#include "vmm/testrun/test_case.h"

namespace minivmm::testrun {

// `suite_of(test)`: the <testsuite> a test belongs to.
std::string tap_report(const std::vector<TestCase>& tests, const std::vector<TestResult>& results);
std::string junit_report(const std::vector<TestCase>& tests, const std::vector<TestResult>& results,
                         const std::vector<std::string>& suite_of_test, double wall_s);
std::string results_tsv(const std::vector<TestCase>& tests, const std::vector<TestResult>& results);

// `text` as XML 1.0 character data or attribute value: markup escaped, characters XML cannot
// hold (control characters but tab, CR and newline; invalid UTF-8) replaced with '?'.
std::string xml_escape(std::string_view text);

}  // namespace minivmm::testrun
