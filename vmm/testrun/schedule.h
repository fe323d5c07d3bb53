// The order tests start in. With N at a time, a long test that starts last keeps one slot busy
// after the others are done: kvm-unit-tests' last entry, `debug`, runs into its 90 s timeout
// on this host, and in cfg order it started when little else was left. When the logs folder
// holds the results of an earlier run (results.tsv), the tests start longest first by those
// times (ctest orders by its recorded costs the same way); tests without an earlier time start
// first, in their own order, since nothing says they are short. Reports keep the sources'
// order whatever the start order.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/testrun/test_case.h"

namespace minivmm::testrun {

// name -> duration_s from a results.tsv (reports.h); lines it cannot read are skipped.
std::map<std::string, double> previous_durations(std::string_view results_tsv);

// The indices of `tests` in the order to start them.
std::vector<std::size_t> start_order(const std::vector<TestCase>& tests,
                                     const std::map<std::string, double>& previous);

}  // namespace minivmm::testrun
