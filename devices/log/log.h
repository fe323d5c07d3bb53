// The logging front end of devices/ and vmm/: log::warn("drive {}: ...", path) and its siblings.
//
// Why not spdlog::warn() directly: every call of spdlog's templates instantiates spdlog's and
// fmt's formatting code in the calling file, and that is what made logging files slow to
// compile. Measured with gcc 12 -O2: a file that only includes <spdlog/spdlog.h> compiles in
// 1.25 s; with one spdlog::warn("x {}", x) in it, 5.3 s. Here a call is a thin template that
// checks the format string at compile time (fmt::format_string) and packs references to its
// arguments (fmt::make_format_args); the formatting and spdlog are behind ONE out-of-line
// function, vlog() in devices/log/log.cc, compiled once. The same call through this header, with fmt
// compiled once rather than header-only (devices/log/fmt_impl.cc): 0.58 s.
//
// vlog() checks the level before it formats anything, like spdlog's own calls: some calls are
// on per-exit paths (an unmapped port, a guest's unknown command) and cost a call and a load
// when their level is off. The messages go to spdlog's default logger, so they look as before.
#pragma once

#include <fmt/core.h>

#include <string>
#include <string_view>

namespace minivmm::log {

// spdlog's levels, with spdlog's numbers (devices/log/log.cc checks them).
enum class Level : int { trace = 0, debug, info, warn, error, critical, off };

// Formats `format` with `args` and hands the message to spdlog's default logger, if that logger
// logs `level`; otherwise returns without formatting. Never throws: a failure to format or
// to write is swallowed (spdlog's own calls do the same), so noexcept device code may log.
void vlog(Level level, fmt::string_view format, fmt::format_args args) noexcept;

template <typename... T>
void trace(fmt::format_string<T...> format, T&&... args) {
  vlog(Level::trace, format, fmt::make_format_args(args...));
}
template <typename... T>
void debug(fmt::format_string<T...> format, T&&... args) {
  vlog(Level::debug, format, fmt::make_format_args(args...));
}
template <typename... T>
void info(fmt::format_string<T...> format, T&&... args) {
  vlog(Level::info, format, fmt::make_format_args(args...));
}
template <typename... T>
void warn(fmt::format_string<T...> format, T&&... args) {
  vlog(Level::warn, format, fmt::make_format_args(args...));
}
template <typename... T>
void error(fmt::format_string<T...> format, T&&... args) {
  vlog(Level::error, format, fmt::make_format_args(args...));
}
template <typename... T>
void critical(fmt::format_string<T...> format, T&&... args) {
  vlog(Level::critical, format, fmt::make_format_args(args...));
}

// The rest of spdlog that the program and the fuzz targets use, so that they need not include
// spdlog's headers either (1.25 s per file before any call).

// spdlog::set_level: the level of every logger, the default one included.
void set_level(Level level);

// spdlog::level::from_str: "trace", "debug", "info", "warning" or "warn", "error" or "err",
// "critical", "off"; anything else is off.
Level level_from_name(std::string_view name);

// Makes a logger named `name` that writes to stderr (in colour on a terminal) with spdlog's
// `pattern` the default logger, for the calls above.
void use_stderr_logger(const std::string& name, const std::string& pattern);

}  // namespace minivmm::log
