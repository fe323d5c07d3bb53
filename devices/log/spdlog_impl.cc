// spdlog's own implementation, compiled once, for the lean runtime (CMake option
// MINIVMM_LEAN_RUNTIME). Debian ships spdlog only as a shared library, and libspdlog.so pulls
// in libstdc++.so: 2 MiB of each idle VMM's RSS. Every other file includes spdlog's headers
// with SPDLOG_COMPILED_LIB, which leaves the definitions out; here they are compiled in, from
// the same headers, for the sinks minivmm uses (stderr in colour, devices/log/log.cc). fmt's own
// implementation is compiled once too, next door (devices/log/fmt_impl.cc).
#ifndef SPDLOG_COMPILED_LIB
#error "spdlog_impl.cc is built only with SPDLOG_COMPILED_LIB (MINIVMM_LEAN_RUNTIME)"
#endif

#include <mutex>

#include <spdlog/common-inl.h>
#include <spdlog/details/backtracer-inl.h>
#include <spdlog/details/log_msg-inl.h>
#include <spdlog/details/log_msg_buffer-inl.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/details/os-inl.h>
#include <spdlog/details/periodic_worker-inl.h>
#include <spdlog/details/registry-inl.h>
#include <spdlog/logger-inl.h>
#include <spdlog/pattern_formatter-inl.h>
#include <spdlog/sinks/ansicolor_sink-inl.h>
#include <spdlog/sinks/base_sink-inl.h>
#include <spdlog/sinks/sink-inl.h>
#include <spdlog/sinks/stdout_color_sinks-inl.h>
#include <spdlog/sinks/stdout_sinks-inl.h>
#include <spdlog/spdlog-inl.h>

// The class templates behind the sinks: their member definitions are in the -inl headers
// above, so each one used must be instantiated here.
template class spdlog::sinks::base_sink<std::mutex>;
template class spdlog::sinks::base_sink<spdlog::details::null_mutex>;
template class spdlog::sinks::ansicolor_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::ansicolor_sink<spdlog::details::console_nullmutex>;
template class spdlog::sinks::ansicolor_stdout_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::ansicolor_stderr_sink<spdlog::details::console_mutex>;
template std::shared_ptr<spdlog::logger> spdlog::stderr_color_mt<spdlog::synchronous_factory>(
    const std::string& logger_name, spdlog::color_mode mode);
