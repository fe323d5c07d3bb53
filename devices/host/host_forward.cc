#include "devices/host/host_forward.h"

#include <arpa/inet.h>

#include "devices/host/net_backend.h"

namespace minivmm::devices {
namespace {

[[noreturn]] void fail(const HostForward& f, const std::string& why) {
  throw NetBackendError(f.spec + ": " + why +
                        " (expected [tcp|udp]:[HOSTADDR]:HOSTPORT-[GUESTADDR]:GUESTPORT)");
}

std::uint16_t parse_port(const HostForward& f, std::string_view text, const char* which) {
  unsigned long v = 0;
  bool ok = !text.empty() && text.size() <= 5;
  for (const char c : text) {
    if (c < '0' || c > '9') {
      ok = false;
      break;
    }
    v = v * 10 + static_cast<unsigned long>(c - '0');
  }
  if (!ok || v == 0 || v > 65535) {
    fail(f, std::string("bad ") + which + " port '" + std::string(text) + "' (1-65535)");
  }
  return static_cast<std::uint16_t>(v);
}

in_addr parse_addr(const HostForward& f, std::string_view text, const char* which) {
  in_addr a{};
  if (text.empty()) return a;
  const std::string s(text);
  if (::inet_pton(AF_INET, s.c_str(), &a) != 1) {
    fail(f, std::string("bad ") + which + " address '" + s + "' (an IPv4 address, or nothing)");
  }
  return a;
}

}  // namespace

HostForward parse_host_forward(std::string_view value) {
  HostForward f;
  f.spec = "hostfwd=" + std::string(value);
  const auto colon = value.find(':');
  if (colon == std::string_view::npos) fail(f, "no protocol field");
  const std::string_view proto = value.substr(0, colon);
  if (proto == "udp") {
    f.udp = true;
  } else if (proto != "tcp" && !proto.empty()) {
    fail(f, "unknown protocol '" + std::string(proto) + "' (tcp or udp)");
  }
  const std::string_view rest = value.substr(colon + 1);
  const auto dash = rest.find('-');
  if (dash == std::string_view::npos) fail(f, "no '-' between the host and the guest side");
  const std::string_view host = rest.substr(0, dash);
  const std::string_view guest = rest.substr(dash + 1);
  const auto host_colon = host.rfind(':');
  if (host_colon == std::string_view::npos) fail(f, "no ':' before the host port");
  const auto guest_colon = guest.rfind(':');
  if (guest_colon == std::string_view::npos) fail(f, "no ':' before the guest port");
  f.host_addr = parse_addr(f, host.substr(0, host_colon), "host");
  f.host_port = parse_port(f, host.substr(host_colon + 1), "host");
  f.guest_addr = parse_addr(f, guest.substr(0, guest_colon), "guest");
  f.guest_port = parse_port(f, guest.substr(guest_colon + 1), "guest");
  return f;
}

}  // namespace minivmm::devices
