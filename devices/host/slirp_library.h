// libslirp, loaded with dlopen the first time user-mode networking is asked for. libslirp links
// glib and pcre2 (about 1.3 MiB of RSS, mostly shared file pages); a VMM without `--net user`
// must not pay that in memory or start-up time, so minivmm builds against libslirp's header only
// (which needs no glib header) and resolves the handful of functions it calls here. Nothing is
// ever unloaded: glib does not support being unloaded.
//
// glib's default log handler probes the terminal and journald and opens /etc/localtime before it
// writes to stderr, syscalls the loop thread's seccomp list need not allow. load() installs a
// handler (g_log_set_default_handler, found through libslirp's own dependency scope) that hands
// libslirp's messages to minivmm's log instead.
#pragma once

#include <slirp/libslirp.h>

#include <string>

namespace minivmm::devices {

struct SlirpLibrary {
  decltype(&::slirp_new) slirp_new = nullptr;
  decltype(&::slirp_cleanup) slirp_cleanup = nullptr;
  decltype(&::slirp_input) slirp_input = nullptr;
  decltype(&::slirp_pollfds_fill) slirp_pollfds_fill = nullptr;
  decltype(&::slirp_pollfds_poll) slirp_pollfds_poll = nullptr;
  decltype(&::slirp_add_hostfwd) slirp_add_hostfwd = nullptr;
  // libslirp 4.7 and later; without it the timers go through SlirpCb::timer_new instead.
  decltype(&::slirp_handle_timer) slirp_handle_timer = nullptr;
  std::string version;  // slirp_version_string()

  // Loads libslirp.so.0 once per process (RTLD_NOW | RTLD_LOCAL) and returns the same table
  // after. Thread-safe. Throws NetBackendError naming the library, the missing symbol or the
  // package to install.
  static const SlirpLibrary& load();
};

}  // namespace minivmm::devices
