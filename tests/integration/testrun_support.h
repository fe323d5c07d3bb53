// What the `minivmm test` integration tests share: scratch folders, files written whole, and
// the real parsers that judge a report (python's XML parser for JUnit).
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace minivmm::testing {

inline void spit(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// `s` quoted for sh: one word whatever it holds.
inline std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A folder of its own per test under /tmp (named minivmm-WHAT-XXXXXX), removed at the end.
class TempDir {
 public:
  explicit TempDir(const std::string& what = "testrun") {
    std::string tmpl = "/tmp/minivmm-" + what + "-XXXXXX";
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::system(("rm -rf " + sh_quote(path_)).c_str()); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Whether python's own XML parser reads `path` (a JUnit report well-formed).
inline bool xml_parses(const std::string& path) {
  return std::system(("/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; "
                      "E.parse(sys.argv[1])' " + sh_quote(path))
                         .c_str()) == 0;
}

#ifdef MINIVMM_TESTRUN_DIR
// tests/testrun/check_tap.py's verdict on the TAP report at `path` (0: well-formed, and each
// of `expect` found), as a process status.
inline int check_tap(const std::string& path, const std::vector<std::string>& expect = {}) {
  std::string cmd = "/usr/bin/python3 " MINIVMM_TESTRUN_DIR "/check_tap.py " + sh_quote(path);
  for (const auto& e : expect) cmd += " " + sh_quote(e);
  return std::system(cmd.c_str());
}
#endif

}  // namespace minivmm::testing
