#include "devices/host/slirp_library.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <string_view>

#include "devices/host/net_backend.h"
#include "devices/log/log.h"

namespace minivmm::devices {
namespace {

constexpr const char* kSoname = "libslirp.so.0";

// glib's GLogFunc and GLogLevelFlags (an int-sized enum), spelled without glib's headers.
using GLogFunc = void (*)(const char* domain, int level, const char* message, void* user_data);
using GLogSetDefaultHandler = GLogFunc (*)(GLogFunc func, void* user_data);
constexpr int kGLogLevelError = 1 << 2, kGLogLevelCritical = 1 << 3, kGLogLevelWarning = 1 << 4,
              kGLogLevelMessage = 1 << 5, kGLogLevelInfo = 1 << 6;

void glib_log(const char* domain, int level, const char* message, void* /*user_data*/) {
  const std::string_view d = domain != nullptr ? domain : "glib";
  const std::string_view m = message != nullptr ? message : "";
  if ((level & (kGLogLevelError | kGLogLevelCritical)) != 0) {
    log::error("{}: {}", d, m);
  } else if ((level & kGLogLevelWarning) != 0) {
    log::warn("{}: {}", d, m);
  } else if ((level & (kGLogLevelMessage | kGLogLevelInfo)) != 0) {
    log::info("{}: {}", d, m);
  } else {
    log::debug("{}: {}", d, m);
  }
}

template <typename F>
void resolve(void* handle, const char* name, F& out, bool required) {
  out = reinterpret_cast<F>(::dlsym(handle, name));
  if (out == nullptr && required) {
    throw NetBackendError(std::string(kSoname) + " has no " + name +
                          " (libslirp 4.1 or later is needed)");
  }
}

std::unique_ptr<SlirpLibrary> open_library() {
  void* handle = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    throw NetBackendError(std::string("user-mode networking needs ") + kSoname + " (" +
                          (why != nullptr ? why : "not found") +
                          "); on Debian: apt-get install libslirp0");
  }
  auto lib = std::make_unique<SlirpLibrary>();
  resolve(handle, "slirp_new", lib->slirp_new, true);
  resolve(handle, "slirp_cleanup", lib->slirp_cleanup, true);
  resolve(handle, "slirp_input", lib->slirp_input, true);
  resolve(handle, "slirp_pollfds_fill", lib->slirp_pollfds_fill, true);
  resolve(handle, "slirp_pollfds_poll", lib->slirp_pollfds_poll, true);
  resolve(handle, "slirp_add_hostfwd", lib->slirp_add_hostfwd, true);
  resolve(handle, "slirp_handle_timer", lib->slirp_handle_timer, false);
  decltype(&::slirp_version_string) version = nullptr;
  resolve(handle, "slirp_version_string", version, true);
  lib->version = version();
  GLogSetDefaultHandler set_handler = nullptr;
  resolve(handle, "g_log_set_default_handler", set_handler, false);
  if (set_handler != nullptr) {
    set_handler(&glib_log, nullptr);
  } else {
    log::warn("{}: glib's g_log_set_default_handler not found; libslirp's messages go to "
              "glib's own handler",
              kSoname);
  }
  log::debug("loaded {} (libslirp {})", kSoname, lib->version);
  return lib;
}

}  // namespace

const SlirpLibrary& SlirpLibrary::load() {
  // A failed load is tried again next time (the user may install the package meanwhile); a
  // successful one is kept for the life of the process.
  static std::mutex mu;
  static std::unique_ptr<SlirpLibrary> loaded;
  std::lock_guard lock(mu);
  if (!loaded) loaded = open_library();
  return *loaded;
}

}  // namespace minivmm::devices
