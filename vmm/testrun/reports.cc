#include "vmm/testrun/reports.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>

namespace minivmm::testrun {
namespace {

std::string fixed3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// Length of the valid UTF-8 sequence at s[i] (0 if there is none), XML-allowed code points only.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (b < 0x80) return 1;
  if ((b & 0xe0) == 0xc0) {
    n = 2;
    cp = b & 0x1f;
  } else if ((b & 0xf0) == 0xe0) {
    n = 3;
    cp = b & 0x0f;
  } else if ((b & 0xf8) == 0xf0) {
    n = 4;
    cp = b & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3f);
  }
  const bool overlong = (n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff) {
    return 0;
  }
  return n;
}

// `text` as a TAP consumer and a YAML parser can read it: valid UTF-8 (a console holds any
// bytes a guest wrote), and no character YAML calls unprintable (C0 controls but tab, DEL, C1
// controls but NEL, U+FFFE and U+FFFF) nor a line break: each becomes '?'.
std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      out += (b < 0x20 && b != '\t') || b == 0x7f ? '?' : text[i];
      ++i;
      continue;
    }
    const std::size_t n = utf8_length(text, i);
    // C1 controls are U+0080..U+009F: 0xc2 0x80..0x9f in UTF-8 (0xc2 0x85 is NEL, allowed).
    const bool c1 = n == 2 && b == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0 &&
                    static_cast<unsigned char>(text[i + 1]) != 0x85;
    if (n == 0 || c1) {
      out += '?';
      i += n == 0 ? 1 : n;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

// A test line's description: printable, and TAP's escapes for '\' and '#' (an unescaped '#'
// starts a directive: a cfg entry named `[a # SKIP b]` read as a skipped test `a`).
std::string tap_description(std::string_view text) {
  std::string out;
  for (char c : printable(text)) {
    if (c == '\t') c = '?';  // one blank-free field for line-based readers
    if (c == '\\' || c == '#') out += '\\';
    out += c;
  }
  return out;
}

std::string yaml_block(std::string_view text, const char* indent) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    auto nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    out += indent + printable(text.substr(start, nl - start)) + "\n";
    start = nl + 1;
  }
  return out;
}

std::string yaml_quote(std::string_view s) {
  std::string out = "'";
  for (char c : printable(s)) {
    if (c == '\'') {
      out += "''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '&': out += "&amp;"; ++i; continue;
      case '<': out += "&lt;"; ++i; continue;
      case '>': out += "&gt;"; ++i; continue;
      case '"': out += "&quot;"; ++i; continue;
      case '\'': out += "&apos;"; ++i; continue;
      default: break;
    }
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      out += '?';
      ++i;
      continue;
    }
    const std::size_t n = utf8_length(text, i);
    if (n == 0) {
      out += '?';
      ++i;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

std::string tap_report(const std::vector<TestCase>& tests, const std::vector<TestResult>& results) {
  std::string out = "TAP version 13\n1.." + std::to_string(results.size()) + "\n";
  std::size_t n = 0;
  for (const TestResult& r : results) {
    const TestCase& t = tests[r.index];
    ++n;
    const bool failed = r.verdict.outcome == Outcome::kFail;
    out += (failed ? "not ok " : "ok ") + std::to_string(n) + " - " + tap_description(t.name);
    if (r.verdict.outcome == Outcome::kSkip) {
      out += " # SKIP " + printable(r.verdict.detail);
    } else if (!r.verdict.detail.empty() && !failed) {
      out += " (" + tap_description(r.verdict.detail) + ")";
    }
    out += "\n";
    if (failed) {
      out += "  ---\n";
      out += "  message: " + yaml_quote(r.verdict.detail.empty() ? "FAIL" : r.verdict.detail) + "\n";
      out += "  duration_ms: " + fixed3(r.duration_s * 1000) + "\n";
      out += "  origin: " + yaml_quote(t.origin) + "\n";
      if (!r.console_tail.empty()) {
        // |2: the block's indentation said, not guessed from a first line that starts
        // with blanks (YAML then took the lines after it for the end of the block).
        out += "  console: |2\n" + yaml_block(r.console_tail, "    ");
      }
      out += "  ...\n";
    }
  }
  return out;
}

std::string junit_report(const std::vector<TestCase>& tests, const std::vector<TestResult>& results,
                         const std::vector<std::string>& suite_of_test, double wall_s) {
  // The suites in the order their first test comes.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const TestResult*>> by_suite;
  for (const TestResult& r : results) {
    const std::string& s = suite_of_test[r.index];
    if (!by_suite.count(s)) order.push_back(s);
    by_suite[s].push_back(&r);
  }
  std::size_t total = 0, failures = 0, skipped = 0;
  for (const TestResult& r : results) {
    ++total;
    failures += r.verdict.outcome == Outcome::kFail;
    skipped += r.verdict.outcome == Outcome::kSkip;
  }
  char stamp[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  if (gmtime_r(&now, &tm)) std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  char host[256] = "";
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';

  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"minivmm test\" tests=\"" + std::to_string(total) + "\" failures=\"" +
         std::to_string(failures) + "\" errors=\"0\" skipped=\"" + std::to_string(skipped) +
         "\" time=\"" + fixed3(wall_s) + "\">\n";
  for (const std::string& suite : order) {
    const auto& rs = by_suite[suite];
    std::size_t f = 0, s = 0;
    double time = 0;
    for (const TestResult* r : rs) {
      f += r->verdict.outcome == Outcome::kFail;
      s += r->verdict.outcome == Outcome::kSkip;
      time += r->duration_s;
    }
    out += "  <testsuite name=\"" + xml_escape(suite) + "\" tests=\"" + std::to_string(rs.size()) +
           "\" failures=\"" + std::to_string(f) + "\" errors=\"0\" skipped=\"" + std::to_string(s) +
           "\" time=\"" + fixed3(time) + "\" timestamp=\"" + stamp + "\" hostname=\"" +
           xml_escape(host) + "\">\n";
    for (const TestResult* r : rs) {
      const TestCase& t = tests[r->index];
      out += "    <testcase name=\"" + xml_escape(t.name) + "\" classname=\"" + xml_escape(suite) +
             "\" time=\"" + fixed3(r->duration_s) + "\"";
      if (r->verdict.outcome == Outcome::kPass && r->console_tail.empty()) {
        out += "/>\n";
        continue;
      }
      out += ">\n";
      const std::string reason = xml_escape(r->verdict.detail);
      if (r->verdict.outcome == Outcome::kFail) {
        out += "      <failure message=\"" + reason + "\" type=\"FAIL\">" +
               xml_escape(verdict_line(t.name, r->verdict)) + " [" + xml_escape(t.origin) +
               "]</failure>\n";
      } else if (r->verdict.outcome == Outcome::kSkip) {
        out += "      <skipped message=\"" + reason + "\"/>\n";
      }
      if (!r->console_tail.empty()) {
        out += "      <system-out>" + xml_escape(r->console_tail) + "</system-out>\n";
      }
      out += "    </testcase>\n";
    }
    out += "  </testsuite>\n";
  }
  out += "</testsuites>\n";
  return out;
}

std::string results_tsv(const std::vector<TestCase>& tests, const std::vector<TestResult>& results) {
  std::string out = "name\tverdict\tdetail\tduration_s\tvmm_s\trunner_ms\n";
  for (const TestResult& r : results) {
    std::string detail = r.verdict.detail;
    for (char& c : detail) {
      if (c == '\t' || c == '\n' || c == '\r') c = ' ';
    }
    const double runner_ms = r.ran ? (r.duration_s - r.vmm_s) * 1000 : r.duration_s * 1000;
    std::string name = tests[r.index].name;
    for (char& c : name) {
      if (c == '\t' || c == '\n' || c == '\r') c = ' ';
    }
    out += name + "\t" + std::string(outcome_word(r.verdict.outcome)) + "\t" +
           detail + "\t" + fixed3(r.duration_s) + "\t" + fixed3(r.ran ? r.vmm_s : 0) + "\t" +
           fixed3(runner_ms) + "\n";
  }
  return out;
}

}  // namespace minivmm::testrun
