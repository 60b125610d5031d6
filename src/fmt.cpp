// fmt's compiled part, once for the whole program. fmt is used as a
// library, not header-only: header-only mode compiles its formatting engine
// (format-inl.h: the float printer, vformat_to) into every file that formats,
// 2 to 3 s of the compiler each, about a fifth of a build. Debian 12 ships no
// libfmt.a for a static link, so this file is that library: format-inl.h's
// functions defined here, and the templates format.h declares extern
// instantiated for the character types we use.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template FMT_API auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void vformat_to(buffer<char>&, string_view, basic_format_args<FMT_BUFFER_CONTEXT(char)>,
                                 locale_ref);
}  // namespace detail
FMT_END_NAMESPACE
