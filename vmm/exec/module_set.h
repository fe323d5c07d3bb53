// Which kernel modules minivmm exec's initramfs carries, and in what order the init loads
// them: the wanted modules and everything they depend on, dependencies first. The kernel's
// modules folder (lib/modules/RELEASE) says it in modules.dep (depmod's "path: dep dep ...",
// paths relative to the folder); modules.builtin lists those built in, which need no file.
// An unpacked kernel package has no modules.dep (depmod runs at install): then every
// *.ko under the folder is found by name and its dependencies read from its own .modinfo
// ("depends="), uncompressed modules only.
//
// Everything read here is the user's file and may be hostile: a path that is absolute, has a
// ".." or leads to anything but a regular file, a dependency cycle, a line without a ':', a
// module the dependencies name that is not there, are each an error naming the file and what
// is wrong; sizes are bounded (kMaxDepBytes, kMaxModules).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minivmm::vmm::exec {

struct WantedModule {
  std::string name;       // "9pnet_virtio"; '-' and '_' are the same
  bool required = true;   // false: packed if the kernel has it (overlay, pvpanic_mmio)
};

struct ModuleFile {
  std::string name;      // normalized ('_')
  std::string rel_path;  // relative to the modules folder, as modules.dep spells it
  std::int64_t mtime_ns = 0;
  std::uint64_t size = 0;
};

struct ModuleSet {
  std::vector<ModuleFile> load_order;  // dependencies first
  std::vector<std::string> builtin;    // wanted (or needed) modules that are built in
  std::vector<std::string> absent;     // optional modules the kernel does not have
};

inline constexpr std::size_t kMaxDepBytes = 64u << 20;
inline constexpr std::size_t kMaxModules = 100'000;

// A module file's name: *.ko, *.ko.xz, *.ko.zst, *.ko.gz (module_info.cc).
bool is_module_path(std::string_view path);

// "9pnet-virtio" -> "9pnet_virtio"; the file name's stem for a path ("a/b/9p.ko.xz" -> "9p").
std::string module_name(std::string_view path_or_name);

// Parses modules.dep text into (path, its dependencies' paths) records; nullopt and `why` on
// a malformed line (numbered). Exposed for the tests.
std::optional<std::vector<std::pair<std::string, std::vector<std::string>>>> parse_modules_dep(
    std::string_view text, std::string& why);

// The modules `wanted` needs from `dir`, or nullopt and `why`.
std::optional<ModuleSet> resolve_modules(const std::string& dir,
                                         const std::vector<WantedModule>& wanted,
                                         std::string& why);

// The "depends=" of an uncompressed module's .modinfo section ("" when none); nullopt when the
// bytes are not an ELF64 with one.
std::optional<std::string> modinfo_depends(std::string_view elf);

}  // namespace minivmm::vmm::exec
