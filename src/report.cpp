#include "report.hpp"

#include "bytes.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <random>
#ifndef _WIN32
#include <climits>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#endif
#if defined(__APPLE__)
#include <cstdlib>
#include <sys/types.h>
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

Gap process_group_gap() {
    return {"process-group",
            "the command shares the caller's process group, which nothing here covers: a signal to its own group "
            "(kill(0)) reaches the caller's processes in it unless Landlock's signal scope (ABI 6) holds, and a "
            "command that orphans the group while one of its processes is stopped makes the kernel send the whole "
            "group SIGHUP and SIGCONT",
            false};
}

void declare_process_group(Confinement& c) {
    if (c.layers.empty() || c.policy.mode == Mode::DangerFullAccess) return;
    auto& gaps = c.layers.front().gaps;
    if (std::none_of(gaps.begin(), gaps.end(), [](const Gap& g) { return g.effect == "process-group"; }))
        gaps.push_back(process_group_gap());
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

std::vector<Gap> Confinement::gaps() const {
    std::vector<Gap> out = open_gaps(layers);
    // The defaults the caller dropped (--unprotect, the config's unprotect)
    // are writable on every runner: named here too, not only in
    // `unprotected`, so the gaps list each path no protection holds (issue
    // 37). Not an own effect: the policy asked for it.
    if (!layers.empty() && !policy.unprotected.empty()) {
        std::string paths;
        for (const auto& u : policy.unprotected) paths += (paths.empty() ? "" : ", ") + u;
        out.push_back({"unprotected-paths",
                       "dropped from the protected set (--unprotect, config unprotect), writable with everything "
                       "below them: " + paths,
                       false});
    }
    return out;
}

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

// Paths and arguments are bytes; JSON strings are Unicode. A value that is
// not UTF-8 is written with U+FFFD in place of each bad byte (as every record
// is rendered) and, beside it, "<key>Bytes": the exact bytes in lower-case
// hex, so two different paths never read the same (docs/DECISIONS.md).
static void put_bytes(ordered_json& j, const std::string& key, const std::string& value) {
    j[key] = value;
    if (!is_utf8(value)) j[key + "Bytes"] = to_hex(value);
}

static void put_bytes(ordered_json& j, const std::string& key, const std::vector<std::string>& values) {
    j[key] = values;
    bool all = true;
    for (const auto& v : values) all = all && is_utf8(v);
    if (all) return;
    ordered_json a = ordered_json::array();
    for (const auto& v : values) a.push_back(to_hex(v));
    j[key + "Bytes"] = std::move(a);
}

static ordered_json skipped_json(const std::vector<Skipped>& s, const char* key) {
    ordered_json a = ordered_json::array();
    for (const auto& x : s) {
        ordered_json e;
        put_bytes(e, key, x.runner);
        e["reason"] = x.reason;
        a.push_back(std::move(e));
    }
    return a;
}

// The network axis (issue 17): the mode, who chose it, how each part is
// enforced here and the typed gaps left. `host` (and anything a runner did
// not govern) is the `network` gap, as it always was.
static ordered_json network_json(const Confinement& c) {
    const Policy& p = c.policy;
    std::vector<Gap> gaps = c.network.gaps;
    if (p.network == Network::Host && c.network.enforced.empty() && gaps.empty())
        gaps.push_back({"network", "network access is not governed: --net host (the default) leaves TCP, UDP and "
                                   "unix sockets as the host has them", false});
    if (p.network_requested)
        gaps.insert(gaps.begin(), Gap{"network", fmt::format("the {} asks for network \"{}\", which cannot hold "
                                                             "under danger-full-access (nothing is confined)",
                                                             p.network_source == NetworkSource::Session ? "session log" : "config",
                                                             to_string(*p.network_requested)), false});
    ordered_json n;
    n["mode"] = p.net_allow ? std::string_view("allow") : to_string(p.network);
    n["source"] = to_string(p.network_source);
    if (p.net_allow) {
        std::vector<std::string> allow, deny;
        for (const auto& r : p.net_allow->allow) allow.push_back(r.text);
        for (const auto& r : p.net_allow->deny) deny.push_back(r.text);
        n["allow"] = allow;
        n["deny"] = deny;
    }
    if (p.network_requested) n["requested"] = to_string(*p.network_requested);
    n["enforcement"] = to_string(p.network == Network::Host ? Enforcement::None
                                 : gaps.empty()             ? Enforcement::Full
                                                            : Enforcement::Partial);
    n["enforced"] = c.network.enforced;
    n["gaps"] = gaps_json(gaps);
    n["denialSignatures"] = c.network.denial_signatures;
    return n;
}

// The resource limits (issue 21): each limit asked, the backend that
// enforces it here ("cgroup", "rlimit", "process-tree", "none") and how, its
// typed gaps, and whether --limits required was asked.
static ordered_json limits_json(const limits::Plan& l) {
    ordered_json a = ordered_json::array();
    for (const auto& p : l.limits) {
        ordered_json e;
        e["limit"] = p.name;
        e["value"] = p.value;
        e["backend"] = p.backend;
        e["how"] = p.how.empty() ? ordered_json(nullptr) : ordered_json(p.how);
        ordered_json g = ordered_json::array();
        for (const auto& x : p.gaps) g.push_back(ordered_json{{"effect", x.effect}, {"detail", x.detail}});
        e["gaps"] = std::move(g);
        a.push_back(std::move(e));
    }
    ordered_json j;
    j["required"] = l.required;
    j["enforced"] = std::move(a);
    if (l.timeout_ms) j["killAfterMs"] = l.kill_after_ms;
    return j;
}

ordered_json confinement_record(const Confinement& c) {
    const Policy& p = c.policy;
    ordered_json j;
    j["type"] = "confinement";
    j["version"] = 1;
    j["mode"] = to_string(p.mode);
    j["modeSource"] = to_string(p.mode_source);
    put_bytes(j, "workspaceRoot", p.workspace_root);
    j["rootSource"] = to_string(p.root_source);
    j["runner"] = to_string(c.runner);
    j["enforcement"] = to_string(c.enforcement());
    const std::vector<Gap> gaps = c.gaps();
    ordered_json net = network_json(c);
    // One field to gate on (issue 42): everything asked for is enforced.
    // What was not is named in notHeld; the metadata gap (chmod, chown,
    // utimes, xattrs: no content is written) is the one own effect held does
    // not count, so a run whose only gap it is reads held with enforcement
    // "partial" (man page, REPORT; docs/DECISIONS.md).
    std::vector<std::string> not_held;
    const auto miss = [&not_held](const std::string& what) {
        if (std::find(not_held.begin(), not_held.end(), what) == not_held.end()) not_held.push_back(what);
    };
    for (const auto& g : gaps)
        if (g.own_effect && g.effect != "metadata") miss(g.effect);
    if (p.network_requested || (p.network != Network::Host && !net["gaps"].empty())) miss("network");
    for (const auto& l : c.limits.limits)
        if (l.backend == "none") miss("limit:" + l.name);
    if (p.mode != Mode::DangerFullAccess) {
        // Existing paths, as the gaps judge them (an absent one has nothing to keep).
        for (const auto& e : p.protected_paths)
            if (e.exists && e.enforced.empty() && e.why_not != kProtectedOutsideText && !e.watched)
                miss("protected-paths");
        for (const auto& h : p.hidden_paths)
            if (h.exists && h.enforced.empty()) miss("hidden-paths");
    }
    j["held"] = not_held.empty();
    j["notHeld"] = not_held;
    j["gaps"] = gaps_json(gaps);
    j["network"] = std::move(net);
    ordered_json layers = ordered_json::array();
    for (const auto& l : c.layers) {
        ordered_json lj{{"name", l.name}, {"enforcement", to_string(l.enforcement)}, {"gaps", gaps_json(l.gaps)}};
        for (auto it = l.details.begin(); it != l.details.end(); ++it) lj[it.key()] = it.value();
        layers.push_back(std::move(lj));
    }
    j["layers"] = std::move(layers);
    ordered_json roots = ordered_json::array();
    for (const auto& r : p.writable_roots) {
        ordered_json rj;
        put_bytes(rj, "path", r.path);
        rj["source"] = to_string(r.source);
        rj["persists"] = r.persists;
        if (r.created) rj["created"] = true;  // made for this run (issue 42); absent otherwise
        if (!r.tool.empty()) rj["cache"] = r.tool;  // source "cache": whose (issue 42)
        roots.push_back(std::move(rj));
    }
    j["writableRoots"] = std::move(roots);
    j["writableFiles"] = p.writable_files;
    // The carve-outs (issue 18): each protected path, and how it is kept
    // read-only or why it is not.
    // A hidden path has no `what` (it is always the caller's or the secrets list).
    // whyNot is a code (kCarveReasons); its prose once, in whyNotText.
    ordered_json why_text = ordered_json::object();
    auto carved = [&why_text](const std::vector<ProtectedPath>& list, bool with_what) {
        ordered_json out = ordered_json::array();
        for (const auto& e : list) {
            ordered_json ej;
            put_bytes(ej, "path", e.path);
            ej["source"] = e.source;
            if (with_what) ej["what"] = e.what;
            ej["exists"] = e.exists;
            ej["enforced"] = e.enforced.empty() ? ordered_json(nullptr) : ordered_json(e.enforced);
            ordered_json why = nullptr;
            if (!e.why_not.empty()) {
                why = e.why_not;  // prose of no code: kept whole (not expected)
                for (const auto& r : kCarveReasons)
                    if (e.why_not == r.text) {
                        why = r.code;
                        why_text[r.code] = r.text;
                    }
            }
            ej["whyNot"] = std::move(why);
            // A hidden directory's parts left readable (~/.ssh's public ones).
            if (!e.shown.empty()) {
                ordered_json names = ordered_json::array();
                for (const auto& s : e.shown) names.push_back(s.first);
                ej["readable"] = std::move(names);
            }
            out.push_back(std::move(ej));
        }
        return out;
    };
    j["protectedPaths"] = carved(p.protected_paths, true);
    j["unprotected"] = p.unprotected;
    j["hiddenPaths"] = carved(p.hidden_paths, false);
    j["whyNotText"] = std::move(why_text);
    j["privateTmp"] = p.private_tmp;
    const Descendants& d = c.descendants;
    j["descendants"] = ordered_json{{"atExit", d.killed ? "killed" : "left-running"},
                                    {"by", d.by.empty() ? ordered_json(nullptr) : ordered_json(d.by)},
                                    {"why", d.why.empty() ? ordered_json(nullptr) : ordered_json(d.why)}};
    std::vector<Skipped> not_granted;
    for (const auto& n : p.not_granted) not_granted.push_back({n.path, n.reason});
    not_granted.insert(not_granted.end(), c.not_granted.begin(), c.not_granted.end());
    j["notGranted"] = skipped_json(not_granted, "path");
    j["skippedRunners"] = skipped_json(c.skipped, "runner");
    j["denialSignatures"] = c.denial_signatures;
    j["runnerFailureRules"] = c.runner_failure_rules;
    for (const auto& l : c.layers)
        if (l.name == "landlock" && l.details.contains("abi")) j["landlockAbi"] = l.details["abi"];
    j["hardening"] = c.hardening;
    j["userNamespaces"] = c.user_namespaces.empty() ? ordered_json(nullptr) : ordered_json(c.user_namespaces);
    j["limits"] = limits_json(c.limits);
    j["keptFds"] = p.keep_fds;
    // Where keptFds came from beyond --keep-fd: make's jobserver, named by the
    // caller's MAKEFLAGS (issue 42). Null when MAKEFLAGS names none.
    const Jobserver& js = p.jobserver;
    if (js.auth == Jobserver::Auth::None) {
        j["jobserver"] = nullptr;
    } else {
        // Member by member, with the kinds of value the record already uses (binary size).
        const bool fds = js.auth == Jobserver::Auth::Fds;
        ordered_json& o = j["jobserver"];
        o["source"] = "MAKEFLAGS";
        o["auth"] = fds ? "fds" : "fifo";
        o["fds"] = fds ? std::vector<int>{js.read_fd, js.write_fd} : std::vector<int>{};
        o["kept"] = js.kept;
        o["whyNot"] = js.why_not.empty() ? ordered_json(nullptr) : ordered_json(js.why_not);
    }
    const EnvChanges& e = c.environment;
    j["environment"] = ordered_json{
        {"cleared", e.cleared}, {"set", e.set}, {"unset", e.unset}, {"scrubbed", e.scrubbed}};
    put_bytes(j, "command", c.command_path);
    put_bytes(j, "argv", c.argv);
    put_bytes(j, "execArgv", c.exec_argv.empty() ? c.argv : c.exec_argv);
    return j;
}

namespace {
// The run's nonce, once made or adopted. Function-local: the bwrap stage runs
// before dynamic initialisers (bwrap_stage.cpp early_entry).
std::string& run_storage() {
    static std::string run;
    return run;
}
constexpr size_t kRunBytes = 16;
constexpr std::string_view kRunMember = R"(,"run":")";
}  // namespace

void begin_run() {
    unsigned char b[kRunBytes];
    size_t got = 0;
#if defined(__linux__)
    while (got < sizeof b) {
        const ssize_t n = ::getrandom(b + got, sizeof b - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
#elif defined(__APPLE__)
    ::arc4random_buf(b, sizeof b);
    got = sizeof b;
#endif
    if (got < sizeof b) {
        // No getrandom (a kernel before 3.17, a seccomp profile that refuses
        // it): the C++ library's source, /dev/urandom or the OS's generator.
        std::random_device rd;
        for (size_t i = got; i < sizeof b; ++i) b[i] = static_cast<unsigned char>(rd());
    }
    run_storage() = to_hex(std::string(reinterpret_cast<const char*>(b), sizeof b));
}

void end_run() noexcept { run_storage().clear(); }

const std::string& run_id() noexcept { return run_storage(); }

bool adopt_run_id(std::string_view record) {
    const size_t at = record.rfind(kRunMember);
    if (at == std::string_view::npos) return false;
    const std::string_view rest = record.substr(at + kRunMember.size());
    if (rest.size() != 2 * kRunBytes + 2 || rest.substr(2 * kRunBytes) != "\"}") return false;
    const std::string_view hex = rest.substr(0, 2 * kRunBytes);
    for (char ch : hex)
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    run_storage().assign(hex);
    return true;
}

std::string report_line(ordered_json record) {
    if (const std::string& run = run_storage(); !run.empty()) record["run"] = run;
    return json_line(record);
}

ordered_json error_record(const Outcome& o) {
    ordered_json j;
    j["type"] = "error";
    j["version"] = 1;
    j["code"] = o.code();
    j["message"] = o.text();
    j["exitStatus"] = o.exit_status();
    if (!o.runner_failure.empty()) j["runnerFailure"] = o.runner_failure;
    return j;
}

#ifndef _WIN32  // Windows: src/windows/platform_win.cpp (C runtime fds)
bool reaches_report(int report_fd, int fd) {
    struct stat a {}, b {};
    if (::fstat(report_fd, &a) != 0 || ::fstat(fd, &b) != 0) return false;
    if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) return false;
    // What is written to /dev/null is read by nobody: nothing to forge.
    if (S_ISCHR(a.st_mode) && major(a.st_rdev) == 1 && minor(a.st_rdev) == 3) return false;
    // The same pipe, socket or file: whatever description, a write lands in
    // what the report's reader reads.
    if (S_ISFIFO(a.st_mode) || S_ISSOCK(a.st_mode) || S_ISREG(a.st_mode)) return true;
    // A terminal or another device: the same open file description only.
#if defined(__linux__)
    const long r = ::syscall(SYS_kcmp, ::getpid(), ::getpid(), 0 /* KCMP_FILE */, report_fd, fd);
    if (r == 0) return true;
    if (r > 0) return false;
#endif
    // kcmp refused: the status flags decide, and a tie is taken as the same.
    return ::fcntl(report_fd, F_GETFL) == ::fcntl(fd, F_GETFL);
}

[[gnu::hot]] Outcome Report::open(int fd) {
    if (fd < 0) return Outcome::success();
    if (fd == 0) return fail(Err::ReportFd, "--report-fd 0: the report needs an fd open for writing, not stdin");
    int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0) return failf(Err::ReportFd, "--report-fd {}: {}", fd, std::strerror(errno));
    if ((fl & O_ACCMODE) == O_RDONLY) return failf(Err::ReportFd, "--report-fd {}: not open for writing", fd);
    // Close-on-exec so the command never holds the report; stdout/stderr stay
    // as they are when the caller chose them, and the records go to a copy of
    // their open file above 2: a pipe a supervisor or a runner puts on the
    // command's fd 1 or 2 never carries a record.
    if (fd > 2) {
        int fdfl = ::fcntl(fd, F_GETFD);
        if (fdfl < 0 || ::fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0)
            return failf(Err::ReportFd, "--report-fd {}: {}", fd, std::strerror(errno));
        fd_ = fd;
    } else {
        fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (fd_ < 0) return failf(Err::ReportFd, "--report-fd {}: {}", fd, std::strerror(errno));
    }
    named_ = fd;
    return Outcome::success();
}

Outcome Report::write(const ordered_json& record) const {
    if (fd_ < 0) return Outcome::success();
    return write_line(report_line(record));
}

[[gnu::hot]] Outcome Report::write_line(std::string line) const {
    if (fd_ < 0) return Outcome::success();
    if (stalled_) return fail(Err::ReportWrite, report_text(ReportText::Stalled, named_, 0));
    line += '\n';
    const int err = write_report(fd_, line);
    if (err == ETIMEDOUT) {
        stalled_ = true;
        const Outcome o = fail(Err::ReportWrite, report_text(ReportText::Stalled, named_, 1));
        print_error(o.text());
        return o;
    }
    if (err) return failf(Err::ReportWrite, "cannot write the report to fd {}: {}", named_, std::strerror(err));
    return Outcome::success();
}

int write_report(int fd, std::string_view data) noexcept {
#if defined(__linux__)
    struct stat st {};
    if (::fstat(fd, &st) != 0) return errno;
    const bool pipe = S_ISFIFO(st.st_mode), sock = S_ISSOCK(st.st_mode);
    // A file, a terminal, /dev/null: as every other write of the program.
    if (!pipe && !sock) return write_whole(fd, data);
    // What the pipe would hold besides the line it holds already.
    const auto room = [fd]() -> long {
        int queued = 0;
        if (::ioctl(fd, FIONREAD, &queued) != 0) queued = 0;
        const int cap = ::fcntl(fd, F_GETPIPE_SZ);
        return cap > 0 ? static_cast<long>(cap) - queued : 0;
    };
    if (pipe && room() < static_cast<long>(data.size())) {
        int queued = 0;
        if (::ioctl(fd, FIONREAD, &queued) != 0) queued = 0;
        // A page more than the bytes: a page the reader has begun is not refilled.
        const size_t want = data.size() + static_cast<size_t>(queued) + 4096;
        if (want < (size_t{1} << 30)) (void)::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(want));
    }
    struct sigaction ign {}, old {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old);
    int err = 0;
    while (!data.empty()) {
        pollfd pfd{fd, POLLOUT, 0};
        const int r = ::poll(&pfd, 1, kReportWaitMs);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            err = errno;
            break;
        }
        if (r == 0) {
            err = ETIMEDOUT;
            break;
        }
        // A pipe that says it has room has a free page at least: a write of
        // PIPE_BUF goes in whole without blocking, the whole rest where it fits.
        size_t n = data.size();
        if (pipe && room() < static_cast<long>(n)) n = std::min<size_t>(n, PIPE_BUF);
        const ssize_t w = sock ? ::send(fd, data.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL) : ::write(fd, data.data(), n);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (w <= 0) {
            err = w < 0 ? errno : EIO;
            break;
        }
        data.remove_prefix(static_cast<size_t>(w));
    }
    ::sigaction(SIGPIPE, &old, nullptr);
    return err;
#else
    return write_whole(fd, data);
#endif
}
#endif

int report_failure(const Report& report, const Outcome& o) {
    print_error(o.stderr_text());
    // A report that could not be written takes no error record either (a
    // stalled reader would hold the exit up once more).
    if (o.err != Err::ReportWrite) (void)report.write(error_record(o));
    return o.exit_status();
}

}  // namespace dsh
