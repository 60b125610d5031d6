// explain / --dry-run and check --write: what resolution and the runner chose,
// rendered for a person (text) or a program (--json). Pure renderers; the
// caller resolves and prepares the launch (the same code run uses), so what
// is shown is what would run.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "launch.hpp"
#include "resolve.hpp"

namespace dsh {

std::string plan_text(const Resolution& r, const Plan& l);
nlohmann::ordered_json plan_json(const Resolution& r, const Plan& l);

// `dsh-confine probe`: every runner of this host, probed afresh, and what auto
// would select; JSON or text on stdout. 0 when a confined run can start here,
// else 125.
int probe_command(const RunnerEnv& env, bool json);

struct CheckAnswer {
    std::string path;            // as asked
    std::string canonical;       // as the policy sees it
    bool allowed = false;
    std::string matched;         // the root or file that allows it; empty when denied
    std::string matched_source;  // "workspace", "tmp", "tmpdir", "flag", "config", "file", "mode"
    bool persists = true;        // false: the write lands in a private /tmp, discarded at exit
};

// The seed's in-process write fence: the same canonical writable roots the
// runners are given. Pure apart from realpath.
CheckAnswer check_write(const Policy& p, const std::string& path, const std::string& cwd);
std::string check_text(const Resolution& r, const CheckAnswer& a);
nlohmann::ordered_json check_json(const Resolution& r, const CheckAnswer& a);

}  // namespace dsh
