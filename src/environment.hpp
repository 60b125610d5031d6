// The command's environment: a pure function from the caller's environment and
// the --clearenv / --setenv / --unsetenv / --scrub-secrets flags to the final
// list of "K=V" entries, plus the names (never the values) that changed, for
// the confinement record. No flag: nothing is read or copied, the command
// inherits dsh-confine's environment as it is.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "errors.hpp"

namespace dsh {

struct EnvRequest {
    bool clear = false;                                   // --clearenv
    std::vector<std::pair<std::string, std::string>> set;  // --setenv K V (in order)
    std::vector<std::string> unset;                       // --unsetenv K
    bool scrub_secrets = false;                           // --scrub-secrets

    // True when any flag asks for a change; otherwise the environment is inherited untouched.
    bool any() const noexcept { return clear || scrub_secrets || !set.empty() || !unset.empty(); }
};

// What changed, by name only: values never reach the report.
struct EnvChanges {
    bool cleared = false;
    std::vector<std::string> set;       // names given to --setenv, in order, deduplicated
    std::vector<std::string> unset;     // names --unsetenv removed (present before)
    std::vector<std::string> scrubbed;  // names --scrub-secrets removed, in environment order
};

// Whether --scrub-secrets drops a variable of this name. Case-insensitive,
// by whole words between '_': TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE,
// CREDENTIAL(S), COOKIE, APIKEY, AUTHTOKEN anywhere; KEY after API, ACCESS,
// PRIVATE, SECRET, CLIENT, ... (API_KEY, AWS_ACCESS_KEY_ID); PWD after a
// prefix (MYSQL_PWD); SSH_AUTH_SOCK, KRB5CCNAME, PGPASSWORD,
// DOCKER_AUTH_CONFIG. Never a name ending in BUNDLE, CERT(S), CERTIFICATE(S),
// CAINFO or CAPATH (trust stores, which TLS needs).
bool looks_like_secret(std::string_view name) noexcept;

// Whether a value carries a credential in a URL: scheme://user:password@...
bool value_carries_credentials(std::string_view value) noexcept;

// A name usable with --setenv / --unsetenv: non-empty and without '='
// (execve takes the first '=' as the end of the name).
Outcome check_env_name(std::string_view flag, std::string_view name);

// Applies, in this order: --clearenv (start empty), --scrub-secrets, --unsetenv,
// then --setenv (last one of a name wins). --setenv comes last so an explicit
// value is never scrubbed: the caller asked for it by name. `current` is the
// caller's environment as "K=V" strings; entries without '=' are kept as they
// are unless --clearenv drops them. The result keeps the caller's order, with
// new names appended.
Outcome build_environment(const EnvRequest& req, const std::vector<std::string>& current,
                          std::vector<std::string>& out, EnvChanges& changes);

// make's jobserver as MAKEFLAGS names it (issue 42): the last
// --jobserver-auth= (make 4.2 and later) or --jobserver-fds= (older) before
// the "--" that starts make's variable assignments. "R,W" names two fds,
// "fifo:PATH" (make 4.4) a named pipe that make opens by path. Anything else
// (a malformed value, one fd twice, a negative or huge number) names nothing.
struct Jobserver {
    enum class Auth { None, Fds, Fifo };
    Auth auth = Auth::None;
    int read_fd = -1;
    int write_fd = -1;
    // Settled when the run is planned (app.cpp keep_jobserver): both fds are
    // kept, or neither and why not (a fifo: why there is nothing to keep).
    bool kept = false;
    std::string why_not;
};
Jobserver parse_jobserver(std::string_view makeflags);

// The value of `name` in a "K=V" list, or nullptr.
const char* env_lookup(const std::vector<std::string>& env, std::string_view name) noexcept;

}  // namespace dsh
