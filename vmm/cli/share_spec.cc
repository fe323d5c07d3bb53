#include "vmm/cli/share_spec.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace minivmm::vmm {

std::optional<ShareSpec> parse_share_spec(const std::string& spec, std::size_t index,
                                          std::string& error) {
  ShareSpec s;
  std::string rest = spec;
  // Only a trailing ",ro" is an option: a folder whose name has a comma elsewhere still works.
  if (rest.size() > 3 && rest.compare(rest.size() - 3, 3, ",ro") == 0) {
    s.read_only = true;
    rest.resize(rest.size() - 3);
  }
  if (rest.empty()) {
    error = "'" + spec + "' has no folder (HOSTDIR[,ro])";
    return std::nullopt;
  }
  struct stat st{};
  if (::stat(rest.c_str(), &st) != 0) {
    error = "'" + rest + "': " + std::strerror(errno);
    return std::nullopt;
  }
  if (!S_ISDIR(st.st_mode)) {
    error = "'" + rest + "' is not a directory";
    return std::nullopt;
  }
  s.path = rest;
  s.tag = "share" + std::to_string(index);
  return s;
}

}  // namespace minivmm::vmm
