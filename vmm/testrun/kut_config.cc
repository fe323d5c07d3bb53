#include "vmm/testrun/kut_config.h"

#include <cctype>
#include <optional>
#include <set>

namespace minivmm::testrun {
namespace {

std::string_view trim(std::string_view s) {
  // bash's `read` with the default IFS: spaces, tabs (and the newline, already gone).
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// `line` =~ ^KEY\ *=\ *(.*)$ : the value, or nullopt.
std::optional<std::string_view> key_value(std::string_view line, std::string_view key) {
  if (line.substr(0, key.size()) != key) return std::nullopt;
  std::string_view rest = line.substr(key.size());
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (rest.empty() || rest.front() != '=') return std::nullopt;
  rest.remove_prefix(1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return rest;
}

// A name and `=` with nothing the suite's keys allow: what a misspelt or unknown key looks
// like (`Accel = kvm`, `timeout\t= 5`, `kvmtool_params` is the suite's own, for kvmtool).
std::optional<std::string> key_like(std::string_view line) {
  std::size_t i = 0;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' ||
                             line[i] == '-')) {
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::size_t j = i;
  while (j < line.size() && (line[j] == ' ' || line[j] == '\t')) ++j;
  if (j >= line.size() || line[j] != '=') return std::nullopt;
  return std::string(line.substr(0, i));
}

}  // namespace

bool find_word(std::string_view word, std::string_view list) {
  const std::string hay = " " + std::string(list) + " ";
  return hay.find(" " + std::string(word) + " ") != std::string::npos;
}

std::string kut_command_text(const KutEntry& e) {
  std::string text = "-smp " + e.smp;
  if (e.has_test_args) text += " -append " + e.test_args;
  // The suite's default QEMU options are empty, and the params follow them after a space.
  if (!e.params.empty()) text += " " + e.params;
  return text;
}

KutConfig parse_kut_config(std::string_view text, std::string_view path) {
  KutConfig cfg;
  std::optional<KutEntry> cur;
  std::set<std::string> warned;
  int lineno = 0;

  auto dispatch = [&] {
    if (cur && !cur->name.empty()) cfg.entries.push_back(std::move(*cur));
    cur.reset();
  };
  auto warn = [&](const std::string& key, const std::string& why) {
    if (!warned.insert(key).second) return;
    cfg.warnings.push_back(std::string(path) + ":" + std::to_string(lineno) + ": " + why);
  };

  while (true) {
    const auto nl = text.find('\n');
    // A last line without a newline is never read by `while read -r line`.
    if (nl == std::string_view::npos) break;
    std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl + 1);
    ++lineno;

    if (line.size() >= 2 && line.front() == '[' && line.back() == ']') {
      dispatch();
      cur.emplace();
      cur->name = std::string(line.substr(1, line.size() - 2));
      cur->line = lineno;
      continue;
    }
    if (!line.empty() && line.front() == '#') continue;

    // The suite's keys, in its order; the first that matches wins.
    KutEntry scratch;
    KutEntry& e = cur ? *cur : scratch;  // keys before the first header are read and dropped
    std::optional<std::string_view> v;
    if ((v = key_value(line, "file"))) {
      e.file = std::string(*v);
    } else if ((v = key_value(line, "smp"))) {
      e.smp = std::string(*v);
    } else if ((v = key_value(line, "test_args"))) {
      e.has_test_args = true;
      e.test_args = std::string(*v);
    } else if ((v = key_value(line, "extra_params")) || (v = key_value(line, "qemu_params"))) {
      std::string_view value = *v;
      if (value.substr(0, 3) == R"(""")") {
        // The multi-line form: lines joined with newlines up to one that ends in """.
        std::string joined(value.substr(3));
        while (true) {
          const auto next = text.find('\n');
          if (next == std::string_view::npos) break;
          std::string_view more = trim(text.substr(0, next));
          text.remove_prefix(next + 1);
          ++lineno;
          // An odd number of backslashes before the newline continues the line.
          std::size_t backslashes = 0;
          while (backslashes < joined.size() && joined[joined.size() - 1 - backslashes] == '\\') {
            ++backslashes;
          }
          if (backslashes % 2 == 1) {
            joined.pop_back();
          } else {
            joined += '\n';
          }
          if (more.size() >= 3 && more.substr(more.size() - 3) == R"(""")") {
            joined += more.substr(0, more.size() - 3);
            break;
          }
          joined += more;
        }
        e.params = joined;
      } else {
        e.params = std::string(value);
      }
    } else if ((v = key_value(line, "groups"))) {
      e.groups = std::string(*v);
    } else if ((v = key_value(line, "arch"))) {
      e.arch = std::string(*v);
    } else if ((v = key_value(line, "machine"))) {
      e.machine = std::string(*v);
    } else if ((v = key_value(line, "check"))) {
      e.check = std::string(*v);
    } else if ((v = key_value(line, "disabled_if"))) {
      e.disabled_if = std::string(*v);
    } else if ((v = key_value(line, "accel"))) {
      e.accel = std::string(*v);
    } else if ((v = key_value(line, "timeout"))) {
      e.timeout = std::string(*v);
    } else if (key_value(line, "kvmtool_params")) {
      // kvmtool's options: the suite reads them only for TARGET=kvmtool.
    } else if (auto key = key_like(line)) {
      warn(*key, "'" + *key + "' is not a key run_tests.sh reads; ignored");
    }
  }
  // The suite's reader hands the last entry on without its disabled_if (it passes one
  // argument fewer at the end of the file); the same entry gets the same verdict here.
  if (cur) cur->disabled_if.clear();
  dispatch();
  return cfg;
}

}  // namespace minivmm::testrun
