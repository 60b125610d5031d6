// Own state and the programs run outside any sandbox (issue 37): what may
// widen a run, and how a program is opened to be run. The texts are defined
// in errors.cpp with the others (the one table); declared here so that the
// many files that include errors.hpp do not depend on them.
#pragma once

#include <string>
#include <string_view>

#include "errors.hpp"

namespace dsh {

// Whether the open file `fd` is sealed, i.e. no confined run could have
// written it whatever its roots were: the file and every directory from its
// own up to / owned by root and writable by nobody else (no sticky
// exception), and, for a root caller (whose runs may name any directory as a
// root), directly in the system config's directory (`system_dir`), the one
// place every run refuses or binds read-only.
bool sealed_file(int fd, bool caller_is_root, std::string_view system_dir);

// open_regular_file's checks (OpenRules trusted, the last link followed) for
// a program: an O_PATH descriptor of it (close-on-exec) to execute by.
Outcome open_trusted_program(const std::string& path, Err err, std::string_view what, int& fd);

// A value that takes a run out of confinement or runs a program outside it
// (`key`), read from a file that is not sealed: `fix` says where it may come from.
std::string unsealed_widening_text(std::string_view what, std::string_view path, std::string_view key,
                                   std::string_view fix);
// A writable root (`source`: where it came from) inside the system config's directory.
std::string system_dir_root_text(std::string_view root, std::string_view source, std::string_view dir);
// An approver command refused by its syntax (`command`: JSON-quoted; `what`:
// the first thing a shell would read otherwise).
std::string approver_syntax_text(std::string_view command, std::string_view what);

}  // namespace dsh
