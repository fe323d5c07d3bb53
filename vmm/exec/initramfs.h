// minivmm exec's initramfs: the init (guest/exec_init/, built into minivmm), the modules it
// loads (module_set.h) and their load order, as one newc cpio (cpio_writer.h). Packing reads
// a few MiB of modules, so the archive is kept in the cache folder
// (~/.cache/minivmm/exec/, or $XDG_CACHE_HOME/minivmm/exec/) under a name made from the
// kernel's release and a hash of its key: the release, the init's size and CRC, and each
// module's path, size and mtime. A hit is checked, not trusted: the key file beside it must
// hold the same key, and the archive the size and CRC-32C the key file recorded; a cached
// archive that fails either is rebuilt. Written to a temporary file and renamed, so two runs
// at once each see a whole archive.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vmm/exec/module_set.h"

namespace minivmm::vmm::exec {

struct InitramfsInputs {
  std::string release;
  std::string modules_dir;
  ModuleSet modules;
  std::span<const std::uint8_t> init;
  std::string cache_dir;  // "" : default_cache_dir()
};

struct InitramfsResult {
  std::vector<std::uint8_t> bytes;
  std::string path;  // where it is cached ("" when the cache could not be written)
  bool cache_hit = false;
  std::string cache_note;  // why a cached archive was not used or could not be written
};

std::string default_cache_dir();
// The cache key text (exposed for the tests).
std::string initramfs_key(const InitramfsInputs& in);
// Packs (or reuses) the archive; nullopt and `why` when a module cannot be read.
std::optional<InitramfsResult> make_initramfs(const InitramfsInputs& in, std::string& why);

}  // namespace minivmm::vmm::exec
