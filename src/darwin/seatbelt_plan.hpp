// Seatbelt (macOS), the pure part: policy -> SBPL profile + sandbox-exec argv.
// Plain C++ with no macOS header, so the Linux unit tests and
// `explain --platform darwin` build it too. The thin part that execs
// sandbox-exec is seatbelt_runner.cpp (darwin hosts only).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../confinement.hpp"

namespace dsh::seatbelt {

// sandbox-exec from its absolute path: a PATH lookup could be shadowed by a
// workspace the command controls.
inline constexpr std::string_view SANDBOX_EXEC = "/usr/bin/sandbox-exec";

// How a path resolves on the target system: the realpath of an absolute path,
// or nullopt when it does not exist. Injected so canonicalisation is a pure
// function: ::realpath on a Mac, a symlink table elsewhere (explain, tests).
using RealpathView = std::function<std::optional<std::string>(const std::string&)>;

// A view made of symlinks only: every path exists, and each (link, target)
// pair rewrites a leading `link` component prefix to `target`, repeatedly,
// as the kernel would follow nested links.
RealpathView symlink_view(std::vector<std::pair<std::string, std::string>> links);

// The symlinks every macOS install has at /: /tmp, /var and /etc point into
// /private (so $TMPDIR, under /var/folders, is really /private/var/folders).
// Seatbelt matches the resolved path, so a rule on "/tmp" matches nothing.
RealpathView macos_view();

// canonicalPath as macOS sees it: the realpath of the longest existing
// prefix, then the missing rest appended and lexically normalised (a missing
// root matches where it will appear once created). Absolute paths only.
std::string canonical(std::string_view path, const RealpathView& view);

// The seed's SBPL string quoting: `\` to `\\` first, then `"` to `\"`.
std::string sbpl_quote(std::string_view s);

struct Plan {
    std::string profile;                                   // the -p text: constants and (param ...) only
    std::vector<std::pair<std::string, std::string>> params;  // -D NAME=VALUE, in order
    std::vector<std::string> writable_roots;               // canonical, deduplicated (first wins)
    std::vector<std::string> argv;                         // sandbox-exec ... -- command...
    Layer layer;
    std::vector<std::string> denial_signatures;
    nlohmann::json runner_failure_rules;
};

// Profile: allow default, deny file-write*, allow /dev/null as a literal,
// and in workspace-write one form allowing each writable root as a subpath
// whose path is a -D parameter. Policy roots are canonicalised through `view`
// and deduplicated. `command` is the caller's argv, appended after "--".
Plan plan(const Policy& policy, const std::vector<std::string>& command, const RealpathView& view);

// The functional probe, used only when the chain has more than one candidate:
// sandbox-exec -p '<read-only profile>' -- /usr/bin/true. Exit 0 means usable.
std::vector<std::string> probe_argv();

// Human-readable plan for `explain --platform darwin`: the argv one element
// per line, then the parameters, the profile, the enforcement and gaps.
std::string render_darwin_plan(const Policy& policy, const std::vector<std::string>& command);

}  // namespace dsh::seatbelt
