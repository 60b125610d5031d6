// The report: JSON lines on a caller-chosen fd, one object per line, "type"
// first and "version":1, "run" (the run's nonce) last. Readers ignore members
// they do not know.
#pragma once

#include <nlohmann/json.hpp>

#include "errors.hpp"
#include "confinement.hpp"

namespace dsh {

using ordered_json = nlohmann::ordered_json;

// JSON as one line, the way every line we write is rendered: compact, and
// invalid UTF-8 (a path, an argument) replaced rather than thrown on.
template <class Json>
std::string json_line(const Json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ordered_json confinement_record(const Confinement& c);
ordered_json error_record(const Outcome& o);

// The run's nonce (issue 38): 128 random bits in lower-case hex, carried as
// the last member, "run", of every record this run writes on the report, so
// that a reader who shares the report's stream with the command (--report-fd
// 1 or 2) keeps only the lines with the first record's nonce. Made once by
// the launcher (begin_run); bwrap's stage adopts the launcher's from the
// record it is handed. Empty until then: records are not stamped (unit tests,
// explain's and check's answers on stdout).
void begin_run();
void end_run() noexcept;  // forgets it (unit tests)
const std::string& run_id() noexcept;
// The stage: takes the nonce of the launcher's rendered record (its last
// member); false when the record carries none.
bool adopt_run_id(std::string_view record);
// `record` rendered as one report line (no newline), stamped with the nonce.
std::string report_line(ordered_json record);

#ifndef _WIN32
// True when a write to `fd` lands where the report's reader reads: the same
// open file description (kcmp KCMP_FILE), or the same pipe, socket or regular
// file reached through another description. /dev/null is nobody's stream.
// Where kcmp is refused (a container's seccomp profile, an old kernel), a
// terminal or other device counts as the same when inode and status flags
// match: two separate opens of one terminal with the same flags are then
// taken as one (refused, never let through).
bool reaches_report(int report_fd, int fd);
#endif

// How long a write of the report waits for a reader that takes nothing (a
// full pipe or socket) before it gives up: a caller that reads only after
// the command ends never holds the run up for longer (issue 42).
inline constexpr int kReportWaitMs = kReportWaitSeconds * 1000;

// Writes one rendered line (newline included) of the report to `fd`. A pipe
// too small for it is first grown (F_SETPIPE_SZ, up to what the host allows:
// /proc/sys/fs/pipe-max-size, 1 MiB by default, for a caller without
// CAP_SYS_RESOURCE), so that a reader who reads only after the exit finds
// the whole line there; a pipe or socket is then written without ever
// blocking, waiting for room at most kReportWaitMs at a time. Returns 0, the
// write's errno, or ETIMEDOUT when the reader took nothing for that long
// (the line may then be cut: the caller says so). Async-signal-safe (the
// command's process writes the confinement record between fork and exec).
int write_report(int fd, std::string_view line) noexcept;

class Report {
public:
    // Validates `fd` (open, writable) and makes it close-on-exec. fd < 0: no
    // report. fd 1 or 2: the records go to a close-on-exec copy above 2, so
    // that they reach the caller's stream even where a supervisor or a runner
    // puts a pipe on the command's fd 1 or 2 (and are never read back from it
    // as the command's output).
    Outcome open(int fd);
    int fd() const noexcept { return fd_; }
    // The fd the caller named (--report-fd), for the texts.
    int named() const noexcept { return named_; }
    bool enabled() const noexcept { return fd_ >= 0; }
    // Writes one line whole. SIGPIPE is held off for the write: a reader that
    // went away is a failed write (exit 125), not a death by signal.
    Outcome write(const ordered_json& record) const;
    // One record already rendered (no newline), e.g. handed over by the bwrap stage.
    Outcome write_line(std::string line) const;

    // Stalled: a write waited kReportWaitMs for a reader that took nothing;
    // said once on stderr, and the records after it are dropped (each would
    // wait as long again).
    bool stalled() const noexcept { return stalled_; }

private:
    int fd_ = -1;
    int named_ = -1;
    mutable bool stalled_ = false;
};

// A run that ends in failure says so the one way: its line on stderr, then
// its error record on the report. Returns the exit status.
int report_failure(const Report& report, const Outcome& o);

}  // namespace dsh
