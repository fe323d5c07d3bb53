#include "vmm/exec/module_set.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>

namespace minivmm::vmm::exec {
namespace {

// Relative, no "." or ".." or empty components, a module's suffix.
bool safe_rel_path(std::string_view p) {
  if (p.empty() || p.front() == '/' || !is_module_path(p)) return false;
  std::size_t start = 0;
  while (start <= p.size()) {
    const std::size_t end = std::min(p.find('/', start), p.size());
    const std::string_view part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

// The whole of a small file; nullopt when absent; `why` for anything worse.
std::optional<std::string> read_module_file(const std::string& path, std::string& why, bool& bad) {
  bad = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    why = path + ": " + std::strerror(errno);
    bad = true;
    return std::nullopt;
  }
  struct stat st{};
  std::string out;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<std::uint64_t>(st.st_size) > kMaxDepBytes) {
    why = path + ": not a regular file of at most " + std::to_string(kMaxDepBytes >> 20) + " MiB";
    bad = true;
    ::close(fd);
    return std::nullopt;
  }
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

struct Graph {
  std::map<std::string, std::string> path_of;                  // name -> rel path
  std::map<std::string, std::vector<std::string>> deps_of;     // name -> dependency names
  std::set<std::string> builtin;
};

bool load_from_dep(const std::string& dir, const std::string& text, Graph& g, std::string& why) {
  const auto records = parse_modules_dep(text, why);
  if (!records) {
    why = dir + "/modules.dep: " + why;
    return false;
  }
  for (const auto& [path, deps] : *records) {
    const std::string name = module_name(path);
    g.path_of[name] = path;
    auto& d = g.deps_of[name];
    for (const auto& dep : deps) d.push_back(module_name(dep));
  }
  return true;
}

// No modules.dep but a modules.order (an unpacked package has one: the build writes it):
// every module it lists, by name. Its paths are as built (".ko"); the file may have been
// compressed since, which stat_and_deps finds.
bool load_from_order(const std::string& text, Graph& g) {
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t nl = std::min(text.find('\n', start), text.size());
    std::string rel = text.substr(start, nl - start);
    start = nl + 1;
    if (is_module_path(rel) && safe_rel_path(rel)) g.path_of.emplace(module_name(rel), rel);
    if (g.path_of.size() > kMaxModules) break;
  }
  return true;
}

// No modules.dep: every module file under `dir`, by name; dependencies from .modinfo later.
bool load_from_tree(const std::string& dir, Graph& g, std::string& why) {
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(dir, ec), end;
  std::size_t seen = 0;
  for (; !ec && it != end; it.increment(ec)) {
    if (++seen > kMaxModules * 4) {
      why = dir + ": more than " + std::to_string(kMaxModules * 4) + " files";
      return false;
    }
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    const std::string rel = std::filesystem::relative(it->path(), dir, ec).string();
    if (!is_module_path(rel) || !safe_rel_path(rel)) continue;
    g.path_of.emplace(module_name(rel), rel);
  }
  if (ec) {
    why = dir + ": " + ec.message();
    return false;
  }
  return true;
}

class Resolver {
 public:
  Resolver(const std::string& dir, Graph& g, bool have_dep) : dir_(dir), g_(g), have_dep_(have_dep) {}

  // Post-order walk: dependencies land in `out` before their users.
  bool visit(const std::string& name, const std::string& needed_by, std::string& why) {
    if (done_.count(name) != 0) return true;
    if (g_.builtin.count(name) != 0) {
      done_.insert(name);
      set_.builtin.push_back(name);
      return true;
    }
    if (on_path_.count(name) != 0) {
      why = "modules depend on each other in a cycle through '" + name + "'";
      return false;
    }
    const auto p = g_.path_of.find(name);
    if (p == g_.path_of.end()) {
      why = "module '" + name + "'" + (needed_by.empty() ? "" : " (needed by " + needed_by + ")") +
            " is neither in " + dir_ + " nor in its modules.builtin";
      return false;
    }
    if (!safe_rel_path(p->second)) {
      why = "module path '" + p->second + "' leaves " + dir_ + " or is not a module";
      return false;
    }
    ModuleFile f{name, p->second, 0, 0};
    std::vector<std::string> deps;
    if (!stat_and_deps(f, deps, why)) return false;
    on_path_.insert(name);
    for (const auto& d : deps) {
      if (!visit(d, name, why)) return false;
    }
    on_path_.erase(name);
    done_.insert(name);
    set_.load_order.push_back(f);
    if (set_.load_order.size() > kMaxModules) {
      why = "more than " + std::to_string(kMaxModules) + " modules";
      return false;
    }
    return true;
  }

  ModuleSet& set() { return set_; }

 private:
  bool stat_and_deps(ModuleFile& f, std::vector<std::string>& deps, std::string& why) {
    const std::string full = dir_ + "/" + f.rel_path;
    struct stat st{};
    if (!have_dep_ && ::lstat(full.c_str(), &st) != 0 && errno == ENOENT) {
      // modules.order names "x.ko"; the package may hold "x.ko.xz" (refused below).
      for (const char* ext : {".xz", ".zst", ".gz"}) {
        if (::lstat((full + ext).c_str(), &st) == 0) {
          f.rel_path += ext;
          break;
        }
      }
    }
    const std::string found = dir_ + "/" + f.rel_path;
    if (::lstat(found.c_str(), &st) != 0) {
      why = found + ": " + std::strerror(errno);
      return false;
    }
    if (!S_ISREG(st.st_mode)) {  // a symlink, a folder, a device: never followed or read
      why = found + ": not a regular file";
      return false;
    }
    f.mtime_ns = std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    f.size = static_cast<std::uint64_t>(st.st_size);
    if (have_dep_) {
      deps = g_.deps_of[f.name];
      return true;
    }
    if (f.rel_path.size() < 3 || f.rel_path.compare(f.rel_path.size() - 3, 3, ".ko") != 0) {
      why = found + ": compressed, and " + dir_ + " has no modules.dep (run depmod -b)";
      return false;
    }
    bool bad = false;
    const auto bytes = read_module_file(found, why, bad);
    const auto depends = bytes ? modinfo_depends(*bytes) : std::nullopt;
    if (!depends) {
      if (!bad) why = found + ": not a kernel module (no .modinfo)";
      return false;
    }
    for (std::size_t start = 0; start < depends->size();) {
      const std::size_t comma = std::min(depends->find(',', start), depends->size());
      if (comma > start) deps.push_back(module_name(depends->substr(start, comma - start)));
      start = comma + 1;
    }
    return true;
  }

  const std::string& dir_;
  Graph& g_;
  const bool have_dep_;
  std::set<std::string> done_, on_path_;
  ModuleSet set_;
};

}  // namespace

std::optional<ModuleSet> resolve_modules(const std::string& dir,
                                         const std::vector<WantedModule>& wanted,
                                         std::string& why) {
  Graph g;
  bool bad = false;
  if (const auto builtin = read_module_file(dir + "/modules.builtin", why, bad)) {
    for (std::size_t start = 0; start < builtin->size();) {
      const std::size_t nl = std::min(builtin->find('\n', start), builtin->size());
      if (nl > start) g.builtin.insert(module_name(builtin->substr(start, nl - start)));
      start = nl + 1;
    }
  } else if (bad) {
    return std::nullopt;
  }
  const auto dep = read_module_file(dir + "/modules.dep", why, bad);
  if (bad) return std::nullopt;
  bool loaded = false;
  if (dep) {
    loaded = load_from_dep(dir, *dep, g, why);
  } else if (const auto order = read_module_file(dir + "/modules.order", why, bad)) {
    loaded = load_from_order(*order, g);  // no walk of the tree: slow over a network or 9p
  } else {
    loaded = !bad && load_from_tree(dir, g, why);
  }
  if (!loaded) return std::nullopt;
  Resolver r(dir, g, dep.has_value());
  for (const WantedModule& w : wanted) {
    const std::string name = module_name(w.name);
    if (!w.required && g.builtin.count(name) == 0 && g.path_of.count(name) == 0) {
      r.set().absent.push_back(name);
      continue;
    }
    if (!r.visit(name, "", why)) return std::nullopt;
  }
  return std::move(r.set());
}

}  // namespace minivmm::vmm::exec
