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
    // Exec mode's forwarder: stdio inherited (nothing captured), no `result`
    // record; a runner failure is still an `error` record and 125, and a
    // death by signal n is re-raised on dsh-confine itself.
    bool forwarder = false;
    // A pty between the command and a terminal on fds 0-2 (terminal.hpp);
    // false: --no-pty.
    bool pty = true;
};

// Exec mode: does this plan need dsh-confine to stay as the parent (its
// program forwards no signal, or a terminal is to be relayed)? When not, the
// plan is exec'd in place and nothing is paid.
bool needs_parent(const Plan& p, bool pty);

// Starts the command as a child (which applies the in-process layers, writes
// the confinement record and execs, exactly as exec mode does), waits for it
// and returns dsh-confine's exit status: the command's own, 128+n for death
// by signal n, 125 for a runner failure, 126/127 when exec failed.
// In forwarder mode the same, except that a death by signal n is re-raised.
int supervise(Plan& p, const Report& report, const SuperviseOptions& opts);

}  // namespace dsh
