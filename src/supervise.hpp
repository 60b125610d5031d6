// --supervise: dsh-confine stays as the parent of the confined command,
// passes its stdio through, forwards signals, and reports how it ended (the
// `result` record), classifying denials and runner failures.
#pragma once

#include "launch.hpp"
#include "report.hpp"

namespace dsh {

struct SuperviseOptions {
    bool markers = false;                // append the seed's marker lines to stderr
    bool escalation_advertised = false;  // add the escalation hint after a denial marker
};

// Starts the command as a child (which applies the in-process layers, writes
// the confinement record and execs, exactly as exec mode does), waits for it
// and returns dsh-confine's exit status: the command's own, 128+n for death
// by signal n, 125 for a runner failure, 126/127 when exec failed.
int supervise(Plan& p, const Report& report, const SuperviseOptions& opts);

}  // namespace dsh
