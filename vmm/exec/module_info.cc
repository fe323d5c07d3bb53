// What a modules folder's own files say: module names, modules.dep lines, a module's
// .modinfo (module_set.h).
#include <cstring>

#include "vmm/exec/module_set.h"

namespace minivmm::vmm::exec {
namespace {

bool module_suffix(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

bool is_module_path(std::string_view p) {
  return module_suffix(p, ".ko") || module_suffix(p, ".ko.xz") || module_suffix(p, ".ko.zst") ||
         module_suffix(p, ".ko.gz");
}

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
