#include "devices/log/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

// The one file of devices/ and vmm/ that includes spdlog and fmt's formatting code (log.h says
// why).

namespace minivmm::log {
namespace {

constexpr spdlog::level::level_enum to_spdlog(Level level) noexcept {
  return static_cast<spdlog::level::level_enum>(level);
}

static_assert(to_spdlog(Level::trace) == spdlog::level::trace);
static_assert(to_spdlog(Level::debug) == spdlog::level::debug);
static_assert(to_spdlog(Level::info) == spdlog::level::info);
static_assert(to_spdlog(Level::warn) == spdlog::level::warn);
static_assert(to_spdlog(Level::error) == spdlog::level::err);
static_assert(to_spdlog(Level::critical) == spdlog::level::critical);
static_assert(to_spdlog(Level::off) == spdlog::level::off);

}  // namespace

void vlog(Level level, fmt::string_view format, fmt::format_args args) noexcept {
  spdlog::logger* logger = spdlog::default_logger_raw();
  const spdlog::level::level_enum l = to_spdlog(level);
  // What spdlog::logger::log_ checks before it formats: the level, or a backtrace that keeps
  // messages of every level (minivmm enables none; checked anyway, it is one load).
  if (logger == nullptr || (!logger->should_log(l) && !logger->should_backtrace())) return;
  try {
    // spdlog's own buffer type: a message of up to 250 bytes needs no allocation.
    spdlog::memory_buf_t buf;
    fmt::vformat_to(fmt::appender(buf), format, args);
    logger->log(l, spdlog::string_view_t(buf.data(), buf.size()));
  } catch (const std::exception& e) {
    // Formatting failed (out of memory, or an fmt::format_error the compile-time check cannot
    // see): say so at the message's level rather than lose it silently. spdlog's own calls tell
    // their error handler, which is not reachable from outside the logger; logger::log catches
    // what its sinks throw, so nothing escapes.
    logger->log(l, spdlog::string_view_t(e.what()));
  } catch (...) {
  }
}

void set_level(Level level) { spdlog::set_level(to_spdlog(level)); }

Level level_from_name(std::string_view name) {
  return static_cast<Level>(spdlog::level::from_str(std::string(name)));
}

void use_stderr_logger(const std::string& name, const std::string& pattern) {
  auto logger = spdlog::stderr_color_mt(name);
  logger->set_pattern(pattern);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace minivmm::log
