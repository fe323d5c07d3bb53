// A control-socket client for the integration tests: connects (retrying while the VMM starts),
// sends one JSON line and reads one back.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/unix_socket.h"

namespace minivmm::testing {

class ControlClient {
 public:
  explicit ControlClient(const std::string& path) {
    for (int i = 0; i < 250 && fd_ < 0; ++i) {
      fd_ = unix_connect(path);
      if (fd_ < 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the VMM is starting
    }
    if (fd_ >= 0) {
      // A VMM that stops answering fails the test instead of hanging it.
      timeval tv{30, 0};
      setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
  }
  ~ControlClient() {
    if (fd_ >= 0) close(fd_);
  }
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  bool connected() const { return fd_ >= 0; }

  // Sends {"cmd":CMD} and returns the reply; a discarded json (is_discarded()) when the VMM
  // did not answer.
  nlohmann::json call(const std::string& cmd) { return call_line(R"({"cmd":")" + cmd + "\"}"); }

  nlohmann::json call_line(const std::string& request) {
    const std::string line = request + "\n";
    if (write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return nlohmann::json(nlohmann::json::value_t::discarded);
    }
    std::string reply;
    char c;
    while (read(fd_, &c, 1) == 1 && c != '\n') reply += c;
    return nlohmann::json::parse(reply, nullptr, false);
  }

 private:
  int fd_ = -1;
};

}  // namespace minivmm::testing
