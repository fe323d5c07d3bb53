#include "vmm/testrun/manifest.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "vmm/machine/size_parser.h"

namespace minivmm::testrun {
namespace {

// The keys a test (or [defaults]) may have.
const std::set<std::string, std::less<>> kTestKeys = {
    "name",    "kernel", "initrd", "cmdline", "cpus",    "memory",     "args",
    "timeout", "exit",   "console", "not_console", "groups", "restore", "resets",
    // minivmm exec (issue 32): a command run in its own guest.
    "command", "share", "modules"};

constexpr double kDefaultTimeoutS = 60;

class Reader {
 public:
  Reader(const std::string& path, const std::map<std::string, std::string>& defines,
         const std::function<std::optional<std::string>(const std::string&)>& getenv)
      : path_(path), defines_(defines), getenv_(getenv) {
    const auto slash = path.rfind('/');
    dir_ = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  }

  std::vector<TestCase> read(const toml::table& root) {
    for (auto&& [key, node] : root) {
      if (key.str() != "defaults" && key.str() != "test") {
        fail(key.source(), "unknown key '" + std::string(key.str()) +
                               "' (a manifest has [defaults] and [[test]] tables)");
      }
    }
    const toml::table empty;
    const toml::table* defaults = &empty;
    if (const toml::node* d = root.get("defaults")) {
      defaults = d->as_table();
      if (!defaults) fail(d->source(), "'defaults' must be a table: [defaults]");
      check_keys(*defaults, /*is_defaults=*/true);
    }
    const toml::node* tests = root.get("test");
    if (!tests) fail(root.source(), "no tests: a manifest has one [[test]] table per test");
    const toml::array* list = tests->as_array();
    if (!list || !list->is_array_of_tables()) fail(tests->source(), "'test' must be [[test]] tables");

    std::vector<TestCase> out;
    std::set<std::string> names;
    for (const toml::node& n : *list) {
      const toml::table& t = *n.as_table();
      check_keys(t, /*is_defaults=*/false);
      TestCase tc = one_test(t, *defaults);
      if (!names.insert(tc.name).second) fail(t.source(), "a second test named '" + tc.name + "'");
      out.push_back(std::move(tc));
    }
    return out;
  }

 private:
  [[noreturn]] void fail(const toml::source_region& where, const std::string& what) const {
    throw ManifestError(path_ + ":" + std::to_string(where.begin.line) + ": " + what);
  }

  void check_keys(const toml::table& t, bool is_defaults) const {
    for (auto&& [key, node] : t) {
      if (!kTestKeys.count(key.str()) || (is_defaults && key.str() == "name")) {
        fail(key.source(), "unknown key '" + std::string(key.str()) + "' in " +
                               (is_defaults ? "[defaults]" : "[[test]]"));
      }
    }
  }

  // The node for `key`: the test's own, else the default's, else null.
  static const toml::node* pick(const toml::table& t, const toml::table& d, std::string_view key) {
    if (const toml::node* n = t.get(key)) return n;
    return d.get(key);
  }

  std::string string_of(const toml::node& n, std::string_view key) const {
    const auto v = n.value<std::string>();
    if (!n.is_string() || !v) fail(n.source(), "'" + std::string(key) + "' must be a string");
    return *v;
  }

  std::int64_t integer_of(const toml::node& n, std::string_view key, std::int64_t lo,
                          std::int64_t hi) const {
    if (!n.is_integer()) fail(n.source(), "'" + std::string(key) + "' must be an integer");
    const std::int64_t v = *n.value<std::int64_t>();
    if (v < lo || v > hi) {
      fail(n.source(), "'" + std::string(key) + "' must be from " + std::to_string(lo) + " to " +
                           std::to_string(hi) + ", not " + std::to_string(v));
    }
    return v;
  }

  std::vector<std::string> strings_of(const toml::node& n, std::string_view key) const {
    if (n.is_string()) return {string_of(n, key)};
    const toml::array* a = n.as_array();
    if (!a) fail(n.source(), "'" + std::string(key) + "' must be a string or an array of strings");
    std::vector<std::string> out;
    for (const toml::node& e : *a) {
      if (!e.is_string()) fail(e.source(), "'" + std::string(key) + "' must hold strings only");
      out.push_back(*e.value<std::string>());
    }
    return out;
  }

  // ${NAME} from --define, else the environment; a path made relative to the manifest's
  // folder unless it is absolute.
  std::string expand(const toml::node& n, std::string text) const {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] != '$' || i + 1 >= text.size() || text[i + 1] != '{') {
        out += text[i];
        continue;
      }
      const auto end = text.find('}', i + 2);
      if (end == std::string::npos) fail(n.source(), "'${' without its '}' in '" + text + "'");
      const std::string name = text.substr(i + 2, end - i - 2);
      std::optional<std::string> value;
      if (auto it = defines_.find(name); it != defines_.end()) value = it->second;
      if (!value && getenv_) value = getenv_(name);
      if (!value) {
        fail(n.source(), "${" + name + "} is not defined (--define " + name +
                             "=VALUE, or an environment variable)");
      }
      out += *value;
      i = end;
    }
    return out;
  }

  // A path written relative is relative to the manifest's folder; one that starts with
  // ${NAME} is the variable's value as given (relative to where minivmm test runs), so that
  // `--define build=build` means what it says on the command line.
  std::string path_of(const toml::node& n, std::string_view key) const {
    const std::string written = string_of(n, key);
    std::string p = expand(n, written);
    if (p.empty()) fail(n.source(), "'" + std::string(key) + "' is empty");
    if (p.front() != '/' && written.rfind("${", 0) != 0) p = dir_ + "/" + p;
    return p;
  }

  // A test that boots a kernel or restores a snapshot: `minivmm run`'s arguments.
  void boot_test(const toml::table& t, const toml::table& d, TestCase& tc) const {
    // A test starts from a snapshot (`restore`) or boots a kernel. A restore in the test or its
    // defaults wins over a default kernel; a test naming both is an error.
    const toml::node* restore = pick(t, d, "restore");
    if (restore && t.get("kernel")) {
      fail(t.get("kernel")->source(), "test '" + tc.name + "' has both 'kernel' and 'restore'");
    }
    if (restore) {
      for (const char* booted : {"initrd", "cmdline", "cpus", "memory"}) {
        if (const toml::node* n = t.get(booted)) {
          fail(n->source(), std::string("'") + booted + "': a restored guest is not booted (the "
                            "snapshot says what it has); test '" + tc.name + "'");
        }
      }
      // The snapshot is the test's input file: checked when it starts, never a report target.
      tc.kernel = path_of(*restore, "restore");
      tc.run_args = {"--restore", tc.kernel, "--no-console-input", "--quiet"};
      if (const toml::node* n = pick(t, d, "resets")) {
        // --reset-on-exit: the test runs resets + 1 rounds from its snapshot in one process;
        // each round's status is in the run report (snapshot.round_statuses), the last one's is
        // the verdict's, and the console holds every round's lines.
        const auto rounds = integer_of(*n, "resets", 1, 1'000'000);
        tc.run_args.insert(tc.run_args.end(), {"--reset-on-exit", std::to_string(rounds)});
      }
    } else {
      if (const toml::node* n = t.get("resets")) {
        fail(n->source(), "'resets' is for a test that starts from a snapshot ('restore')");
      }
      const toml::node* kernel = pick(t, d, "kernel");
      if (!kernel) fail(t.source(), "test '" + tc.name + "' has no 'kernel' (or 'restore')");
      tc.kernel = path_of(*kernel, "kernel");
      // --quiet: minivmm's stderr then holds only what went wrong, which a failure quotes (the
      // run's summary is in the logs' run report).
      tc.run_args = {"--kernel", tc.kernel, "--no-console-input", "--quiet"};
    }
    if (const toml::node* n = restore ? nullptr : pick(t, d, "initrd")) {
      tc.run_args.insert(tc.run_args.end(), {"--initrd", path_of(*n, "initrd")});
    }
    if (const toml::node* n = restore ? nullptr : pick(t, d, "cmdline")) {
      tc.run_args.insert(tc.run_args.end(), {"--cmdline", expand(*n, string_of(*n, "cmdline"))});
    }
    if (const toml::node* n = restore ? nullptr : pick(t, d, "cpus")) {
      tc.run_args.insert(tc.run_args.end(), {"--cpus", std::to_string(integer_of(*n, "cpus", 1, 16))});
    }
    if (const toml::node* n = restore ? nullptr : pick(t, d, "memory")) {
      // "64M", "1G" as `minivmm run --memory` takes them, or a number of MiB.
      const std::string m = n->is_integer() ? std::to_string(integer_of(*n, "memory", 1, 3072)) + "M"
                                            : string_of(*n, "memory");
      if (!vmm::parse_size(m)) {
        fail(n->source(), "'memory': '" + m + "' is not a size (try \"64M\" or \"1G\")");
      }
      tc.run_args.insert(tc.run_args.end(), {"--memory", m});
    }
    if (const toml::node* n = pick(t, d, "args")) {
      for (auto& a : strings_of(*n, "args")) tc.run_args.push_back(expand(*n, a));
    }
  }

  // `command = [...]`: `minivmm exec [--kernel K] [--modules DIR] [--share DIR[,ro]]...
  // [--memory M] [--cpus N] -- COMMAND...`; the command's stdout is the console the
  // expectations read, its status the exit.
  void exec_test(const toml::table& t, const toml::table& d, const toml::node& command,
                 TestCase& tc) const {
    for (const char* booted : {"restore", "resets", "initrd", "cmdline"}) {
      if (const toml::node* n = t.get(booted)) {
        fail(n->source(), std::string("'") + booted + "' is not for a test that runs a 'command'");
      }
    }
    tc.subcommand = "exec";
    if (const toml::node* n = pick(t, d, "kernel")) {
      tc.kernel = path_of(*n, "kernel");
      tc.run_args.insert(tc.run_args.end(), {"--kernel", tc.kernel});
    }
    if (const toml::node* n = pick(t, d, "modules")) {
      tc.run_args.insert(tc.run_args.end(), {"--modules", path_of(*n, "modules")});
    }
    if (const toml::node* n = pick(t, d, "share")) {
      const std::vector<std::string> shares =
          n->is_string() ? std::vector<std::string>{string_of(*n, "share")} : strings_of(*n, "share");
      for (const std::string& written : shares) {
        std::string p = expand(*n, written);
        if (p.empty()) fail(n->source(), "'share' is empty");
        if (p.front() != '/' && written.rfind("${", 0) != 0) p = dir_ + "/" + p;
        tc.run_args.insert(tc.run_args.end(), {"--share", p});
      }
    }
    if (const toml::node* n = pick(t, d, "cpus")) {
      tc.run_args.insert(tc.run_args.end(), {"--cpus", std::to_string(integer_of(*n, "cpus", 1, 16))});
    }
    if (const toml::node* n = pick(t, d, "memory")) {
      const std::string m = n->is_integer() ? std::to_string(integer_of(*n, "memory", 1, 3072)) + "M"
                                            : string_of(*n, "memory");
      if (!vmm::parse_size(m)) {
        fail(n->source(), "'memory': '" + m + "' is not a size (try \"64M\" or \"1G\")");
      }
      tc.run_args.insert(tc.run_args.end(), {"--memory", m});
    }
    if (const toml::node* n = pick(t, d, "args")) {
      for (auto& a : strings_of(*n, "args")) tc.run_args.push_back(expand(*n, a));
    }
    const std::vector<std::string> argv = strings_of(command, "command");
    if (argv.empty()) fail(command.source(), "'command' is empty: give the command and its arguments");
    tc.run_args.push_back("--");
    for (const auto& a : argv) tc.run_args.push_back(expand(command, a));
  }

  TestCase one_test(const toml::table& t, const toml::table& d) const {
    TestCase tc;
    tc.kind = TestCase::Kind::kManifest;
    tc.origin = path_ + ":" + std::to_string(t.source().begin.line);
    const toml::node* name = t.get("name");
    if (!name) fail(t.source(), "a test without a 'name'");
    tc.name = string_of(*name, "name");
    if (tc.name.empty() || tc.name.find_first_of(" \t\n/") != std::string::npos) {
      fail(name->source(), "a test's name is not empty and has no blanks or '/': '" + tc.name + "'");
    }

    if (const toml::node* command = pick(t, d, "command")) {
      exec_test(t, d, *command, tc);
    } else {
      for (const char* key : {"share", "modules"}) {
        if (const toml::node* n = t.get(key)) {
          fail(n->source(), std::string("'") + key + "' is for a test that runs a 'command'");
        }
      }
      boot_test(t, d, tc);
    }

    double timeout = kDefaultTimeoutS;
    if (const toml::node* n = pick(t, d, "timeout")) {
      if (!n->is_number()) fail(n->source(), "'timeout' must be a number of seconds");
      timeout = n->is_integer() ? static_cast<double>(*n->value<std::int64_t>())
                                : *n->value<double>();
      if (!std::isfinite(timeout) || timeout < 0) {
        fail(n->source(), "'timeout' must be 0 (none) or a positive number of seconds");
      }
    }
    if (timeout > 0) tc.timeout_s = timeout;
    std::ostringstream text;
    text << timeout << "s";
    tc.timeout_text = text.str();

    const toml::node* exit = pick(t, d, "exit");
    if (!exit) {
      fail(t.source(), "test '" + tc.name + "' asserts nothing: give it the 'exit' status that passes");
    }
    tc.expect.exit_status = static_cast<int>(integer_of(*exit, "exit", 0, 255));
    if (const toml::node* n = pick(t, d, "console")) tc.expect.console_has = strings_of(*n, "console");
    if (const toml::node* n = pick(t, d, "not_console")) {
      tc.expect.console_lacks = strings_of(*n, "not_console");
    }
    for (const auto& s : tc.expect.console_has) {
      if (s.empty()) fail(t.source(), "an empty 'console' line matches every console");
    }
    for (const auto& s : tc.expect.console_lacks) {
      if (s.empty()) fail(t.source(), "an empty 'not_console' line fails every test");
    }
    if (const toml::node* n = pick(t, d, "groups")) tc.groups = strings_of(*n, "groups");
    return tc;
  }

  const std::string& path_;
  std::string dir_;
  const std::map<std::string, std::string>& defines_;
  const std::function<std::optional<std::string>(const std::string&)>& getenv_;
};

}  // namespace

std::vector<TestCase> parse_manifest(
    std::string_view text, const std::string& path,
    const std::map<std::string, std::string>& defines,
    const std::function<std::optional<std::string>(const std::string&)>& getenv) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw ManifestError(path + ":" + std::to_string(e.source().begin.line) + ":" +
                        std::to_string(e.source().begin.column) + ": " +
                        std::string(e.description()));
  }
  return Reader(path, defines, getenv).read(root);
}

std::vector<TestCase> load_manifest(const std::string& path,
                                    const std::map<std::string, std::string>& defines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ManifestError(path + ": cannot read: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_manifest(ss.str(), path, defines, [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  });
}

}  // namespace minivmm::testrun
