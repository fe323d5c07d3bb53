// What `minivmm test` shows a person while it runs: on a terminal, a status line kept at the
// bottom (`[done/total] elapsed  running: a b`) with one line per test printed above it as it
// ends; elsewhere (a CI log, a pipe) only the per-test lines. A FAIL is followed by the
// console's last 5 lines, so a log shows where the guest was.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "vmm/testrun/runner.h"
#include "vmm/testrun/test_case.h"

namespace minivmm::testrun {

class Progress {
 public:
  // `live`: `out` is a terminal (colours and the status line).
  Progress(std::FILE* out, bool live, std::size_t total) : out_(out), live_(live), total_(total) {}

  // The status line, redrawn (live only).
  void tick(const std::vector<std::string>& running, std::size_t done, double elapsed_s);
  // One test's line: `PASS name (detail) [0.28 s]`.
  void result(const TestCase& t, const TestResult& r);
  // Removes the status line before the summary.
  void clear();

 private:
  std::FILE* out_;
  bool live_;
  std::size_t total_;
  bool shown_ = false;  // a status line is on the screen
};

}  // namespace minivmm::testrun
