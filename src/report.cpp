#include "report.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#ifndef _WIN32
#include <fcntl.h>
#include <unistd.h>
#endif

namespace dsh {

std::string_view to_string(RunnerKind r) noexcept {
    switch (r) {
        case RunnerKind::Auto: return "auto";
        case RunnerKind::Bwrap: return "bwrap";
        case RunnerKind::Landlock: return "landlock";
        case RunnerKind::Seatbelt: return "seatbelt";
        case RunnerKind::WindowsAcl: return "windows-acl";
        case RunnerKind::Custom: return "custom";
        case RunnerKind::None: return "none";
    }
    return "none";
}

std::optional<RunnerKind> parse_runner(std::string_view s) noexcept {
    for (auto r : {RunnerKind::Auto, RunnerKind::Bwrap, RunnerKind::Landlock, RunnerKind::Seatbelt,
                   RunnerKind::WindowsAcl, RunnerKind::Custom})
        if (s == to_string(r)) return r;
    return std::nullopt;
}

std::vector<Gap> open_gaps(const std::vector<Layer>& layers) {
    std::vector<Gap> out;
    if (layers.empty()) return out;
    for (const auto& g : layers.front().gaps) {
        bool everywhere = true;
        for (size_t i = 1; i < layers.size() && everywhere; ++i) {
            bool found = false;
            for (const auto& h : layers[i].gaps) found = found || h.effect == g.effect;
            everywhere = found;
        }
        if (everywhere) out.push_back(g);
    }
    std::stable_partition(out.begin(), out.end(), [](const Gap& g) { return g.own_effect; });
    return out;
}

std::vector<Gap> Confinement::gaps() const { return open_gaps(layers); }

Enforcement Confinement::enforcement() const {
    if (layers.empty()) return Enforcement::None;
    for (const auto& g : gaps())
        if (g.own_effect) return Enforcement::Partial;
    return Enforcement::Full;
}

static ordered_json gaps_json(const std::vector<Gap>& gaps) {
    ordered_json a = ordered_json::array();
    for (const auto& g : gaps)
        a.push_back(ordered_json{{"effect", g.effect}, {"detail", g.detail}, {"ownEffect", g.own_effect}});
    return a;
}

static ordered_json skipped_json(const std::vector<Skipped>& s, const char* key) {
    ordered_json a = ordered_json::array();
    for (const auto& x : s) a.push_back(ordered_json{{key, x.runner}, {"reason", x.reason}});
    return a;
}

ordered_json confinement_record(const Confinement& c) {
    const Policy& p = c.policy;
    ordered_json j;
    j["type"] = "confinement";
    j["version"] = 1;
    j["mode"] = to_string(p.mode);
    j["modeSource"] = p.mode_source;
    j["workspaceRoot"] = p.workspace_root;
    j["rootSource"] = p.root_source;
    j["runner"] = to_string(c.runner);
    j["enforcement"] = to_string(c.enforcement());
    j["gaps"] = gaps_json(c.gaps());
    ordered_json layers = ordered_json::array();
    for (const auto& l : c.layers) {
        ordered_json lj{{"name", l.name}, {"enforcement", to_string(l.enforcement)}, {"gaps", gaps_json(l.gaps)}};
        for (auto it = l.details.begin(); it != l.details.end(); ++it) lj[it.key()] = it.value();
        layers.push_back(std::move(lj));
    }
    j["layers"] = std::move(layers);
    ordered_json roots = ordered_json::array();
    for (const auto& r : p.writable_roots)
        roots.push_back(ordered_json{{"path", r.path}, {"source", r.source}, {"persists", r.persists}});
    j["writableRoots"] = std::move(roots);
    j["writableFiles"] = p.writable_files;
    j["notGranted"] = skipped_json(c.not_granted, "path");
    j["skippedRunners"] = skipped_json(c.skipped, "runner");
    j["denialSignatures"] = c.denial_signatures;
    j["runnerFailureRules"] = c.runner_failure_rules;
    for (const auto& l : c.layers)
        if (l.name == "landlock" && l.details.contains("abi")) j["landlockAbi"] = l.details["abi"];
    j["hardening"] = c.hardening;
    j["keptFds"] = p.keep_fds;
    const EnvChanges& e = c.environment;
    j["environment"] = ordered_json{
        {"cleared", e.cleared}, {"set", e.set}, {"unset", e.unset}, {"scrubbed", e.scrubbed}};
    j["command"] = c.command_path;
    j["argv"] = c.argv;
    return j;
}

ordered_json error_record(const Outcome& o) {
    ordered_json j;
    j["type"] = "error";
    j["version"] = 1;
    j["code"] = o.code();
    j["message"] = o.message;
    j["exitStatus"] = o.exit_status();
    return j;
}

#ifndef _WIN32  // Windows: src/windows/platform_win.cpp (C runtime fds)
Outcome Report::open(int fd) {
    if (fd < 0) return Outcome::success();
    if (fd == 0) return fail(Err::ReportFd, "--report-fd 0: the report needs an fd open for writing, not stdin");
    int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0) return failf(Err::ReportFd, "--report-fd {}: {}", fd, std::strerror(errno));
    if ((fl & O_ACCMODE) == O_RDONLY) return failf(Err::ReportFd, "--report-fd {}: not open for writing", fd);
    // Close-on-exec so the command never holds the report; stdout/stderr stay
    // as they are when the caller chose them.
    if (fd > 2) {
        int fdfl = ::fcntl(fd, F_GETFD);
        if (fdfl < 0 || ::fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0)
            return failf(Err::ReportFd, "--report-fd {}: {}", fd, std::strerror(errno));
    }
    fd_ = fd;
    return Outcome::success();
}

Outcome Report::write(const ordered_json& record) const {
    if (fd_ < 0) return Outcome::success();
    return write_line(record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Outcome Report::write_line(std::string line) const {
    if (fd_ < 0) return Outcome::success();
    line += '\n';
    const int err = write_whole(fd_, line);
    if (err) return failf(Err::ReportWrite, "cannot write the report to fd {}: {}", fd_, std::strerror(err));
    return Outcome::success();
}
#endif

}  // namespace dsh
