// explain / --dry-run and check --write / --read: what resolution and the runner chose,
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
    bool read = false;           // check --read (else --write)
    std::string path;            // as asked
    std::string canonical;       // as the policy sees it
    bool allowed = false;
    std::string matched;         // the root or file that allows a write; empty when denied
    std::string matched_source;  // "workspace", "tmp", "tmpdir", "flag", "config", "file", "mode"
    bool persists = true;        // false: the write lands in a private /tmp, discarded at exit
    // The carve-out that decides it (issue 37): a hidden path at or above it
    // (neither read nor written), a protected path at or above it (not
    // written), or one that is listed but not held (absent when the run
    // started, or a submodule's config that is only watched): `held` false,
    // and the answer is the roots'. Null: none.
    const ProtectedPath* hidden = nullptr;
    const ProtectedPath* carved = nullptr;
    bool held = false;
};

// The answers come from the policy the runners enforce: the writable roots
// (the seed's in-process write fence) with the protected paths kept
// read-only and the hidden paths hidden. Every runner that runs holds them
// all (a runner that would not is refused: chain.cpp), so the answer is
// every runner's. Pure apart from realpath.
CheckAnswer check_write(const Policy& p, const std::string& path, const std::string& cwd);
CheckAnswer check_read(const Policy& p, const std::string& path, const std::string& cwd);
std::string check_text(const Resolution& r, const CheckAnswer& a);
nlohmann::ordered_json check_json(const Resolution& r, const CheckAnswer& a);

}  // namespace dsh
