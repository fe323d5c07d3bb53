#include "vmm/testrun/progress.h"

#include <sys/ioctl.h>

#include <sstream>

namespace minivmm::testrun {
namespace {

std::string colored(Outcome o, bool color) {
  const std::string word(outcome_word(o));
  if (!color) return word;
  const char* code = o == Outcome::kPass ? "32" : o == Outcome::kSkip ? "33" : "31";
  return std::string("\033[") + code + "m" + word + "\033[0m";
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.1f s", s);
  return buf;
}

}  // namespace

void Progress::tick(const std::vector<std::string>& running, std::size_t done, double elapsed_s) {
  if (!live_) return;
  std::string line = "[" + std::to_string(done) + "/" + std::to_string(total_) + "] " +
                     seconds_text(elapsed_s);
  if (!running.empty()) {
    line += "  running:";
    for (const auto& n : running) line += " " + n;
  }
  winsize ws{};
  const std::size_t width =
      ::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
  if (line.size() >= width) line = line.substr(0, width - 1);
  std::fprintf(out_, "\r\033[K%s", line.c_str());
  std::fflush(out_);
  shown_ = true;
}

void Progress::result(const TestCase& t, const TestResult& r) {
  std::string line = colored(r.verdict.outcome, live_) + " " + t.name;
  if (!r.verdict.detail.empty()) line += " (" + r.verdict.detail + ")";
  if (r.ran) line += " [" + seconds_text(r.duration_s) + "]";
  if (live_ && shown_) std::fputs("\r\033[K", out_);
  std::fprintf(out_, "%s\n", line.c_str());
  // A failure shows where the guest was: its console's last lines.
  if (r.verdict.outcome == Outcome::kFail && !r.console_tail.empty()) {
    std::istringstream tail(last_lines(r.console_tail, 5));
    for (std::string l; std::getline(tail, l);) {
      // A guest's escape codes and control bytes would drive the reader's terminal.
      for (char& c : l) {
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) c = '?';
      }
      std::fprintf(out_, "    | %s\n", l.c_str());
    }
  }
  std::fflush(out_);
  shown_ = false;
}

void Progress::clear() {
  if (live_ && shown_) std::fputs("\r\033[K", out_);
  shown_ = false;
  std::fflush(out_);
}

}  // namespace minivmm::testrun
