// libFuzzer target: the config file. The input is the file's text. parse_config
// must return (never crash, throw or hang), give the same answer twice, and
// keep its promises: an error is a ConfigInvalid one-liner that names the
// file; a success holds only values the parser validates (a known mode and
// runner, absolute paths, no NUL, the seed's runnerCommand/signature pairing,
// a positive timeout), came from a strict JSON object with known keys only,
// and reads back the same when written out again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "config.hpp"

namespace {

const std::string kOrigin = "/etc/dsh-confine/config.json";

auto fields(const dsh::Config& c) {
    return std::tie(c.path, c.mode, c.workspace_root, c.runner, c.bwrap_path, c.runner_command,
                    c.runner_failure_signatures, c.probe_timeout_ms, c.writable_roots, c.approver);
}

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }
bool absolute(const std::string& s) { return !s.empty() && s[0] == '/' && !has_nul(s); }
bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n\f\v") == std::string::npos; }

// The config as a file again: every set field under its key.
nlohmann::json write_out(const dsh::Config& c) {
    nlohmann::json j = nlohmann::json::object();
    if (c.mode) j["mode"] = std::string(dsh::to_string(*c.mode));
    if (c.workspace_root) j["workspaceRoot"] = *c.workspace_root;
    if (c.runner) j["runner"] = std::string(dsh::to_string(*c.runner));
    if (c.bwrap_path) j["bwrapPath"] = *c.bwrap_path;
    if (!c.runner_command.empty()) j["runnerCommand"] = c.runner_command;
    if (!c.runner_failure_signatures.empty()) j["runnerFailureSignatures"] = c.runner_failure_signatures;
    if (c.probe_timeout_ms) j["probeTimeoutMs"] = *c.probe_timeout_ms;
    if (!c.writable_roots.empty()) j["writableRoots"] = c.writable_roots;
    if (c.approver) j["approver"] = *c.approver;
    return j;
}

void check_valid(const dsh::Config& c) {
    if (c.path != kOrigin) std::abort();
    if (c.mode && !(*c.mode == dsh::Mode::ReadOnly || *c.mode == dsh::Mode::WorkspaceWrite ||
                    *c.mode == dsh::Mode::DangerFullAccess))
        std::abort();
    if (c.mode && dsh::parse_mode(dsh::to_string(*c.mode)) != c.mode) std::abort();
    // RunnerKind::None is internal ("nothing usable"), never a configured runner.
    if (c.runner && (*c.runner == dsh::RunnerKind::None || dsh::parse_runner(dsh::to_string(*c.runner)) != c.runner))
        std::abort();
    if (c.workspace_root && !absolute(*c.workspace_root)) std::abort();
    if (c.bwrap_path && !absolute(*c.bwrap_path)) std::abort();
    if (!c.runner_command.empty() && !absolute(c.runner_command[0])) std::abort();
    for (const auto& a : c.runner_command)
        if (has_nul(a)) std::abort();
    // The seed's pairing: a custom runner always has signatures, and signatures a runner.
    if (c.runner_command.empty() != c.runner_failure_signatures.empty()) std::abort();
    for (const auto& s : c.runner_failure_signatures)
        if (blank(s) || s.find_first_of("\r\n") != std::string::npos || has_nul(s)) std::abort();
    if (c.probe_timeout_ms && *c.probe_timeout_ms <= 0) std::abort();
    for (const auto& w : c.writable_roots)
        if (!absolute(w)) std::abort();
    if (c.approver && (c.approver->empty() || has_nul(*c.approver))) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);

    dsh::Config a;
    const dsh::Outcome oa = dsh::parse_config(text, kOrigin, a);

    // Deterministic, and nothing left over from whatever `out` held before.
    dsh::Config b;
    b.mode = dsh::Mode::DangerFullAccess;
    b.approver = "stale";
    b.writable_roots = {"/stale"};
    b.probe_timeout_ms = 7;
    const dsh::Outcome ob = dsh::parse_config(text, kOrigin, b);
    if (oa.ok != ob.ok || oa.err != ob.err || oa.message != ob.message) std::abort();
    if (fields(a) != fields(b)) std::abort();

    if (!oa) {
        // What app.cpp prints after "dsh-confine: ", and what the report
        // carries: it names the file, and it is one line. The parser echoes
        // input only JSON-quoted, so no control character gets through raw
        // (DEL aside: nlohmann's own "last read" text keeps it).
        if (oa.err != dsh::Err::ConfigInvalid || oa.exit_status() != 125) std::abort();
        if (oa.message.rfind("config " + kOrigin + ": ", 0) != 0) std::abort();
        for (unsigned char ch : oa.message)
            if (ch < 0x20) std::abort();
        return 0;
    }

    check_valid(a);

    // Only a strict JSON object (no comments) whose keys are all known passes.
    const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/false);
    if (doc.is_discarded() || !doc.is_object()) std::abort();
    static const std::set<std::string> known = {"mode",          "workspaceRoot",  "runner",
                                                "bwrapPath",     "runnerCommand",  "runnerFailureSignatures",
                                                "probeTimeoutMs", "writableRoots", "approver"};
    for (auto it = doc.begin(); it != doc.end(); ++it)
        if (known.count(it.key()) == 0) std::abort();

    // Written out and read back, the same config (the parser's normal form:
    // a whole-millisecond timeout, empty lists absent).
    dsh::Config c;
    if (!dsh::parse_config(write_out(a).dump(), kOrigin, c)) std::abort();
    if (fields(a) != fields(c)) std::abort();
    return 0;
}
