// The bwrap probe's verdict, remembered between calls so that the common case
// (bwrap works) does not pay a probe run each time.
//
// Safety argument: only "usable" verdicts are stored. A stale or forged entry
// can therefore only make dsh-confine run bwrap; if bwrap then cannot set up
// the sandbox it exits with "bwrap: ..." before the command starts (fail
// closed), it never falls through to an unconfined run. An "unusable" verdict
// is never cached, so nobody who can write the cache can push later runs off
// bwrap onto a weaker runner. The key holds everything that decides whether
// bwrap can start here: its binary identity, the kernel, the user, the user
// namespace, the sysctls that gate user namespaces and the seccomp state.
// Under an inherited seccomp filter (whose rules cannot be read back) nothing
// is cached or looked up: every run probes.
#pragma once

#include <optional>
#include <string>

namespace dsh::probe_cache {

// Pure: the cache file's text for `key`, and whether `text` says "usable"
// for exactly `key`.
std::string render(const std::string& key);
bool says_usable(const std::string& text, const std::string& key);

// The key for this process and `bwrap_path`; empty when the binary cannot be
// stat'ed (no caching then).
std::string key_for(const std::string& bwrap_path);

// The cache file, or empty when there is no safe place (see cache_dir in the
// .cpp: $XDG_RUNTIME_DIR, $XDG_CACHE_HOME or ~/.cache, owned by us, 0700).
std::string file_path(bool create_dir);

// Where the cache file would be for this environment, whether or not it or
// its directory exists, for the own-state check (a run must not be able to
// write it): $XDG_RUNTIME_DIR's when that is a safe directory, else
// $XDG_CACHE_HOME's, else ~/.cache's. Empty when there is none.
std::string state_path();

bool lookup(const std::string& key);
void store(const std::string& key);  // best effort, atomic (rename)
void forget();                        // drop a stale entry after a failed probe

}  // namespace dsh::probe_cache
