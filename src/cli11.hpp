// CLI11 without <iostream>'s static initialiser.
//
// With libstdc++ before GCC 13, every translation unit that includes
// <iostream> carries `static ios_base::Init __ioinit`, which builds the eight
// standard streams and the global locale at start-up: 44k instructions, 40%
// of what a static dsh-confine runs before exec (issue 8), on every launch,
// for streams nothing here uses. CLI11 includes <iostream> only to name
// std::cout/std::cerr as defaults (App::exit, deprecated/retired options),
// none of which dsh-confine calls; it formats help into strings. So here the
// declarations are given without the initialiser. Any other file that does
// write to the standard streams includes <iostream> itself and brings the
// initialiser back, so this can cost speed but never correctness. GCC 13's
// libstdc++ initialises the streams inside the library; nothing changes there.
#pragma once

#if defined(__GLIBCXX__) && !defined(_GLIBCXX_IOSTREAM)
#define _GLIBCXX_IOSTREAM 1
#include <istream>
#include <ostream>
namespace std _GLIBCXX_VISIBILITY(default) {
_GLIBCXX_BEGIN_NAMESPACE_VERSION
extern istream cin;
extern ostream cout;
extern ostream cerr;
extern ostream clog;
#ifdef _GLIBCXX_USE_WCHAR_T
extern wistream wcin;
extern wostream wcout;
extern wostream wcerr;
extern wostream wclog;
#endif
_GLIBCXX_END_NAMESPACE_VERSION
}  // namespace std
#endif

#include <CLI/CLI.hpp>
