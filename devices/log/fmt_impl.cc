// fmt's own implementation, compiled once, for the lean runtime (CMake option
// MINIVMM_LEAN_RUNTIME), as libfmt would have it. Debian ships fmt only as a shared library,
// which the lean runtime does not link (libfmt.so pulls in libstdc++.so: top-level
// CMakeLists.txt). fmt header-only (FMT_HEADER_ONLY) would do without it, but then every file
// that includes fmt compiles all of fmt's formatting code again: measured with gcc 12 -O2, a
// file with one fmt::format("x {:#x}", x) took 4.8 s header-only and 0.86 s without; the logging
// front end's calls (devices/log/log.h) 1.14 s and 0.58 s. So no file defines FMT_HEADER_ONLY (all of
// them must see the same FMT_* macros), and the definitions fmt's headers then leave out are here.
#ifdef FMT_HEADER_ONLY
#error "fmt_impl.cc is for a build without FMT_HEADER_ONLY (MINIVMM_LEAN_RUNTIME)"
#endif

#include <locale>

// Without FMT_HEADER_ONLY, FMT_FUNC is empty: including format-inl.h here defines, once and
// not inline, every function fmt's headers declare FMT_API and do not define (fmt::vformat,
// fmt::vprint, fmt::format_error's destructor, detail::throw_format_error, ...).
#include <fmt/format-inl.h>

// Function templates that format.h declares, FMT_API or `extern template`, but defines only in
// format-inl.h: they exist only where instantiated, so every one used must be instantiated here.
FMT_BEGIN_NAMESPACE
namespace detail {

// Shortest round-trip decimal of a float or double (Dragonbox), behind every {} of a float.
template auto dragonbox::to_decimal<float>(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal<double>(double x) noexcept -> dragonbox::decimal_fp<double>;

// The type-erased std::locale behind {:L} and the locale overloads (core.h declares both
// members; format.h's thousands_sep_impl and decimal_point_impl read the locale through them).
#ifndef FMT_STATIC_THOUSANDS_SEPARATOR
template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;
#endif

// format.h: `extern template` for char and wchar_t.
template auto thousands_sep_impl<char>(locale_ref loc) -> thousands_sep_result<char>;
template auto thousands_sep_impl<wchar_t>(locale_ref loc) -> thousands_sep_result<wchar_t>;
template auto decimal_point_impl<char>(locale_ref loc) -> char;
template auto decimal_point_impl<wchar_t>(locale_ref loc) -> wchar_t;

}  // namespace detail
FMT_END_NAMESPACE
