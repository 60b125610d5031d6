// What a face asks of resolution, as plain values: the command line builds it
// (Request::policy_request), and so would any other face. Resolution and
// policy never see the command line's own type.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dsh {

struct PolicyRequest {
    std::optional<std::string> mode;      // a mode's name, checked by resolve
    std::optional<std::string> root;
    std::vector<std::string> writable;
    std::vector<std::string> cache;       // --cache: tools whose cache directories are writable (issue 42)
    // The command's environment as it will be ("K=V": after --clearenv,
    // --setenv, --unsetenv), where the tools' cache variables are read;
    // unset: the caller's own.
    std::optional<std::vector<std::string>> command_env;
    std::vector<std::string> protect;    // --protect: read-only inside the writable roots
    std::vector<std::string> unprotect;  // --unprotect: a default dropped (reported)
    std::vector<std::string> deny_read;  // --deny-read: hidden from the command, every mode
    bool hide_secrets = false;           // --hide-secrets: the default secrets list
    std::vector<int> keep_fds;
    bool private_tmp = false;             // --private-tmp
    bool keep_descendants = false;        // --keep-descendants
    bool allow_userns = false;            // --allow-userns
    std::optional<std::string> config;    // the config file to read (else the default place)
    std::optional<std::string> session;   // the session log
    std::optional<std::string> approver;
    std::optional<std::string> runner;    // a runner's name, checked by resolve
    std::optional<std::string> net;       // a network mode's name or allow=LIST, checked by resolve
    std::vector<std::string> net_deny;    // --net-deny lists (issue 19)
    std::optional<int> probe_timeout_ms;
    // A one-off wider mode, asked for with a reason.
    std::optional<std::string> escalate;
    // A one-off wider network (off < loopback < host), asked for with the same reason.
    std::optional<std::string> escalate_net;
    std::optional<std::string> justification;
    std::string subject = "command";      // what an approval names: "command", or "operation" (check --write)
    std::vector<std::string> argv;        // what it is for
    // A run (not explain, check or the self-test): the carve-outs' walk may
    // wait for the spawn where the runner's stage can wait for it.
    bool late_walk = false;
    // A run: a missing --writable path below the caller's home is made
    // (explain and check only say it would be).
    bool create_missing = false;
};

}  // namespace dsh
