// `--share HOSTDIR[,ro]`: a host folder served to the guest over virtio-9p (docs/9p.md).
#pragma once

#include <optional>
#include <string>

namespace minivmm::vmm {

struct ShareSpec {
  std::string path;
  bool read_only = false;
  std::string tag;  // the mount tag: share0, share1, ... in command-line order
};

// Parses HOSTDIR[,ro] for the share at `index` (its tag is "share<index>") and checks that
// HOSTDIR is a directory (a symlink to one is resolved: the user named it). Returns nullopt
// with `error` set to one line otherwise.
std::optional<ShareSpec> parse_share_spec(const std::string& spec, std::size_t index,
                                          std::string& error);

}  // namespace minivmm::vmm
