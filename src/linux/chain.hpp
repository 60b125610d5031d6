// The Linux runner chain: `auto` = bwrap (stacked with Landlock) when a real
// probe run shows it works, else native Landlock, else SANDBOX_UNAVAILABLE.
// A forced runner (--runner bwrap|landlock|custom) is taken without a probe
// and without fallback.
#pragma once

#include <string>
#include <vector>

#include "../launch.hpp"

namespace dsh::chain {

inline constexpr int kDefaultProbeTimeoutMs = 5000;

struct Options {
    RunnerKind runner = RunnerKind::Auto;
    int probe_timeout_ms = kDefaultProbeTimeoutMs;
    std::string bwrap_path;  // absolute; kBwrapPath unless the config says otherwise
    int report_fd = -1;
    // The custom runner (config runnerCommand / runnerFailureSignatures).
    std::vector<std::string> runner_command;
    std::vector<std::string> runner_failure_signatures;
};

// Fills the launch with the chosen runner, or fails with SANDBOX_UNAVAILABLE
// (seed text) having recorded every runner passed over in l.c.skipped.
Outcome prepare(const Options& opts, Launch& l);

// A child run with a deadline: stdin and (unless captured) stdout on
// /dev/null, stderr captured, its own process group killed at the deadline
// and after it exits. pass_fd, when >= 0, is handed to the child as fd 3.
struct RunResult {
    bool started = false;
    bool timed_out = false;
    int status = 0;  // waitpid status
    std::string out, err;
    std::string error;  // why it could not be started
};
RunResult run_bounded(const std::string& path, const std::vector<std::string>& argv, int timeout_ms,
                      int pass_fd, bool capture_stdout);

struct ProbeResult {
    bool usable = false;
    bool cached = false;
    bool timed_out = false;
    std::string reason;  // why not, when not usable
    long elapsed_ms = 0;
};

// A real run of bwrap's read-only profile that execs our own binary inside
// (the path the runner uses), bounded by timeout_ms; a hang, a failure or a
// spawn error is "not usable". With use_cache, a cached "usable" verdict for
// this exact key is taken without a run, and a fresh "usable" is stored.
ProbeResult probe_bwrap(const std::string& bwrap_path, int timeout_ms, bool use_cache);

}  // namespace dsh::chain
