// A non-blocking pipe for loop tests: put() makes the read end readable, drain() empties it.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace minivmm::testing {

struct TestPipe {
  int r = -1, w = -1;
  TestPipe() {
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0) {
      r = fds[0];
      w = fds[1];
    }
  }
  ~TestPipe() {
    if (r >= 0) close(r);
    if (w >= 0) close(w);
  }
  TestPipe(const TestPipe&) = delete;
  TestPipe& operator=(const TestPipe&) = delete;
  void put(char c = 'x') const { ASSERT_EQ(write(w, &c, 1), 1); }
  void drain() const {
    char buf[64];
    while (read(r, buf, sizeof buf) > 0) {
    }
  }
};

}  // namespace minivmm::testing
