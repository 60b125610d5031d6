// The report: JSON lines on a caller-chosen fd, one object per line, "type"
// first and "version":1. Readers ignore members they do not know.
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

class Report {
public:
    // Validates `fd` (open, writable) and makes it close-on-exec. fd < 0: no report.
    Outcome open(int fd);
    int fd() const noexcept { return fd_; }
    bool enabled() const noexcept { return fd_ >= 0; }
    // Writes one line whole. SIGPIPE is held off for the write: a reader that
    // went away is a failed write (exit 125), not a death by signal.
    Outcome write(const ordered_json& record) const;
    // One record already rendered (no newline), e.g. handed over by the bwrap stage.
    Outcome write_line(std::string line) const;

private:
    int fd_ = -1;
};

// A run that ends in failure says so the one way: its line on stderr, then
// its error record on the report. Returns the exit status.
int report_failure(const Report& report, const Outcome& o);

}  // namespace dsh
