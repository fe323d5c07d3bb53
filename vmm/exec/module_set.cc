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

bool module_ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

bool is_module_path(std::string_view p) {
  return module_ends_with(p, ".ko") || module_ends_with(p, ".ko.xz") || module_ends_with(p, ".ko.zst") ||
         module_ends_with(p, ".ko.gz");
}

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
    if (::lstat(full.c_str(), &st) != 0) {
      why = full + ": " + std::strerror(errno);
      return false;
    }
    if (!S_ISREG(st.st_mode)) {  // a symlink, a folder, a device: never followed or read
      why = full + ": not a regular file";
      return false;
    }
    f.mtime_ns = std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    f.size = static_cast<std::uint64_t>(st.st_size);
    if (have_dep_) {
      deps = g_.deps_of[f.name];
      return true;
    }
    if (!module_ends_with(f.rel_path, ".ko")) {
      why = full + ": compressed, and " + dir_ + " has no modules.dep (run depmod -b)";
      return false;
    }
    bool bad = false;
    const auto bytes = read_module_file(full, why, bad);
    const auto depends = bytes ? modinfo_depends(*bytes) : std::nullopt;
    if (!depends) {
      if (!bad) why = full + ": not a kernel module (no .modinfo)";
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

std::string module_name(std::string_view p) {
  const std::size_t slash = p.rfind('/');
  if (slash != std::string_view::npos) p = p.substr(slash + 1);
  const std::size_t ko = p.find(".ko");
  if (ko != std::string_view::npos && is_module_path(p.substr(ko))) p = p.substr(0, ko);
  std::string out(p);
  for (char& c : out) {
    if (c == '-') c = '_';
  }
  return out;
}

std::optional<std::vector<std::pair<std::string, std::vector<std::string>>>> parse_modules_dep(
    std::string_view text, std::string& why) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  std::size_t line_no = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t nl = std::min(text.find('\n', start), text.size());
    const std::string_view line = text.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      why = "line " + std::to_string(line_no) + " is not 'path: dependencies'";
      return std::nullopt;
    }
    std::pair<std::string, std::vector<std::string>> rec{std::string(line.substr(0, colon)), {}};
    std::string_view rest = line.substr(colon + 1);
    while (!rest.empty()) {
      const std::size_t sp = rest.find_first_not_of(" \t");
      if (sp == std::string_view::npos) break;
      rest = rest.substr(sp);
      const std::size_t e = std::min(rest.find_first_of(" \t"), rest.size());
      rec.second.emplace_back(rest.substr(0, e));
      rest = rest.substr(e);
    }
    out.push_back(std::move(rec));
    if (out.size() > kMaxModules) {
      why = "more than " + std::to_string(kMaxModules) + " modules";
      return std::nullopt;
    }
  }
  return out;
}

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
  if (dep ? !load_from_dep(dir, *dep, g, why) : !load_from_tree(dir, g, why)) return std::nullopt;
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

std::optional<std::string> modinfo_depends(std::string_view elf) {
  // ELF64 little-endian: e_shoff at 0x28, e_shentsize 0x3a, e_shnum 0x3c, e_shstrndx 0x3e.
  const auto u16 = [&](std::size_t at) {
    std::uint16_t v;
    std::memcpy(&v, elf.data() + at, 2);
    return std::size_t{v};
  };
  const auto u64 = [&](std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, elf.data() + at, 8);
    return v;
  };
  if (elf.size() < 0x40 || elf.substr(0, 4) != "\x7f" "ELF" || elf[4] != 2 || elf[5] != 1) {
    return std::nullopt;
  }
  const std::uint64_t shoff = u64(0x28);
  const std::size_t shentsize = u16(0x3a), shnum = u16(0x3c), shstrndx = u16(0x3e);
  if (shentsize < 0x40 || shstrndx >= shnum || shoff > elf.size() ||
      shnum > (elf.size() - shoff) / shentsize) {
    return std::nullopt;
  }
  const auto section = [&](std::size_t i) -> std::optional<std::string_view> {
    const std::size_t h = shoff + i * shentsize;
    const std::uint64_t off = u64(h + 0x18), size = u64(h + 0x20);
    if (off > elf.size() || size > elf.size() - off) return std::nullopt;
    return elf.substr(off, size);
  };
  const auto names = section(shstrndx);
  if (!names) return std::nullopt;
  for (std::size_t i = 0; i < shnum; ++i) {
    std::uint32_t name_off;
    std::memcpy(&name_off, elf.data() + shoff + i * shentsize, 4);
    if (name_off >= names->size()) continue;
    const std::string_view name = names->substr(name_off, names->substr(name_off).find('\0'));
    if (name != ".modinfo") continue;
    const auto info = section(i);
    if (!info) return std::nullopt;
    for (std::size_t start = 0; start < info->size();) {
      const std::size_t nul = std::min(info->find('\0', start), info->size());
      const std::string_view kv = info->substr(start, nul - start);
      if (kv.substr(0, 8) == "depends=") return std::string(kv.substr(8));
      start = nul + 1;
    }
    return std::string();
  }
  return std::nullopt;
}

}  // namespace minivmm::vmm::exec
