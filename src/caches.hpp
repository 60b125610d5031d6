// The tool-cache preset (issue 42): `--cache npm,pip` (or the config's
// "cache") names tools; each expands to the exact directories that tool
// writes its download and build cache to, found the way the tool finds them
// (its own variables first, then XDG_CACHE_HOME, then $HOME), in the
// command's environment. They are granted as --writable paths are (made
// below the caller's home when missing), with their own source in the
// report. Never a tool's configuration, credentials or installed programs:
// only cache directories (docs/DECISIONS.md, "Tool caches").
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "errors.hpp"

namespace dsh::caches {

// The tools, in the order of the documentation.
const std::vector<std::string_view>& tools();

// "npm,pip" -> {"npm", "pip"}, each checked against tools(); a word that is
// not one is a usage error naming the known ones (and the nearest).
Outcome parse_list(std::string_view list, std::vector<std::string>& out);

struct Dir {
    std::string path;  // absolute, as the tool would spell it
    std::string tool;  // "npm"
    std::string from;  // what decided it: "npm_config_cache", "$HOME/.npm", ...
};

// A variable of the command's environment, or nullptr.
using Env = std::function<const char*(std::string_view)>;

// The directories of `tool`, appended to `out`. `home` is the command's
// $HOME (else the caller's home from the password database). A variable
// the tool reads that is set but not absolute, or a directory that would be
// "/" or hold `home`, is an error (the tool's cache would be the caller's
// whole home: use --writable for that, knowingly).
Outcome dirs(std::string_view tool, const Env& env, const std::string& home, std::vector<Dir>& out);

}  // namespace dsh::caches
