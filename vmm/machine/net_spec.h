// `--net tap=IFNAME[,mac=M]`, `--net tap-fd=N[,mac=M]` and
// `--net user[,hostfwd=PROTO:[HOSTADDR]:HOSTPORT-[GUESTADDR]:GUESTPORT]...[,mac=M]` (QEMU's
// spelling), parsed into what the machine builds: a virtio-net device on a TAP interface that
// exists, on a TAP descriptor a parent passed, or on user-mode networking (libslirp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "devices/host/host_forward.h"
#include "devices/virtio/net/virtio_net.h"

namespace minivmm::vmm {

struct NetSpec {
  enum class Kind { kTap, kTapFd, kUser };
  Kind kind = Kind::kUser;
  std::string ifname;  // kTap
  int fd = -1;         // kTapFd
  std::vector<devices::HostForward> forwards;  // kUser
  std::optional<devices::MacAddress> mac;      // nullopt: the machine picks one per device
  std::string text;                            // as given, for messages
};

// One line in `error` on a bad spec: an unknown kind or option, an empty or too long interface
// name, a descriptor that is not a number, a malformed MAC (or a multicast one) or hostfwd.
// Checks only the words: whether the interface exists, or a port is free, is the back-end's.
std::optional<NetSpec> parse_net_spec(const std::string& spec, std::string& error);

// "52:54:00:12:34:56"; nullopt unless six two-digit hex bytes separated by colons.
std::optional<devices::MacAddress> parse_mac(const std::string& text);

}  // namespace minivmm::vmm
