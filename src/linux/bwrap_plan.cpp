// Pure: policy -> bwrap argv, stage argv and the bwrap layer. Unit-tested byte
// for byte (tests/unit/test_bwrap_plan.cpp).
#include "bwrap_plan.hpp"

#include <algorithm>
#include <charconv>

#include "../errors.hpp"
#include "landlock.hpp"

namespace dsh::bwrap {

namespace {

size_t depth(const std::string& path) { return static_cast<size_t>(std::count(path.begin(), path.end(), '/')); }

bool within(const std::string& inner, const std::string& outer) {
    return inner == outer || outer == "/" ||
           (inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 && inner[outer.size()] == '/');
}

[[gnu::hot]] bool parse_int(std::string_view s, int& out) {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size() && out >= 0;
}

// A decimal uint64_t, at most 20 digits (no sign, no space).
[[gnu::hot]] bool parse_u64(std::string_view s, uint64_t& out) {
    if (s.empty() || s.size() > 20) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::vector<std::string> profile_args(const Policy& policy, const ProfileOptions& opts) {
    // The seed's profile, unchanged and in its order.
    std::vector<std::string> a = {"--ro-bind", "/",     "/",           "--dev",  "/dev",
                                  "--unshare-pid", "--proc", "/proc", "--die-with-parent"};
    // No --new-session: it cost the command its controlling terminal (no job
    // control). TIOCSTI and TIOCLINUX (CVE-2017-5226) are refused by the
    // seccomp filter; the launcher, bwrap's parent, gives bwrap a pty's
    // session or one of its own without a terminal (supervise.cpp).
    // --die-with-parent stays: that parent forwards every signal it can
    // catch, so only its SIGKILL takes the sandbox along, as in supervise mode.
    // SysV IPC objects and POSIX message queues are per IPC namespace: the
    // host's stay out of reach, and the command's own still work.
    a.push_back("--unshare-ipc");
    // As root bwrap keeps every capability: the command could remount /
    // read-write. --cap-drop ALL empties the effective, permitted and
    // inheritable sets (and bwrap sets no_new_privs).
    a.insert(a.end(), {"--cap-drop", "ALL"});
    // CAP_SYS_ADMIN too, for the stage to make the host's device nodes
    // read-only (bwrap_runner.cpp seal_device_nodes); dropped with the rest.
    if (opts.stage_keeps_setpcap) a.insert(a.end(), {"--cap-add", "CAP_SETPCAP", "--cap-add", "CAP_SYS_ADMIN"});
    // A fresh procfs still exposes the host's sysctls (hostname, core_pattern)
    // and, to uid 0, sysrq-trigger and hardware knobs: bind them read-only.
    a.insert(a.end(), {"--ro-bind", "/proc/sys", "/proc/sys"});
    if (opts.console_read_only) a.insert(a.end(), {"--remount-ro", "/dev/console"});
    for (const char* p : {"/proc/sysrq-trigger", "/proc/irq", "/proc/bus"})
        a.insert(a.end(), {"--ro-bind-try", p, p});
    // A private /tmp (--private-tmp) is a fresh tmpfs; in read-only it is
    // remounted read-only, so it hides the host's /tmp without widening the
    // mode. Otherwise /tmp is the host's: read-only with /, or bound below
    // like any other writable root.
    if (policy.mode == Mode::ReadOnly && policy.private_tmp)
        a.insert(a.end(), {"--tmpfs", "/tmp", "--remount-ro", "/tmp"});
    // The network axis (issue 17): off and loopback get a network namespace
    // of their own, with only a loopback interface (which bwrap brings up).
    if (policy.network != Network::Host) a.push_back("--unshare-net");
    // Read-deny (--deny-read), in every mode: an empty read-only tmpfs over
    // a directory, /dev/null (read-only) over a file. Only what exists (no
    // mount point is made on the host). Binds of roots come later and cannot
    // uncover them: a hidden path inside a root is hidden again after them.
    // A hidden directory's shown parts (~/.ssh's public keys) are bound
    // through their descriptors into the fresh tmpfs before it is made
    // read-only: their mount points exist only there. What lies below a
    // hidden directory is hidden with it (a mount point there would have to
    // be made in the read-only tmpfs).
    auto hide = [&] {
        for (const auto& h : policy.hidden_paths) {
            if (!h.exists || hidden_within(policy, h)) continue;
            if (h.directory) {
                a.insert(a.end(), {"--tmpfs", h.path});
                for (const auto& [name, fd] : h.shown)
                    a.insert(a.end(), {"--ro-bind", "/proc/self/fd/" + std::to_string(fd), h.path + "/" + name});
                a.insert(a.end(), {"--remount-ro", h.path});
            } else {
                a.insert(a.end(), {"--ro-bind", "/dev/null", h.path});
            }
        }
    };
    if (policy.mode != Mode::WorkspaceWrite) {
        hide();
        return a;
    }

    // The tmpfs first, then every root: a root (or $TMPDIR) under /tmp stays
    // visible and persists, because its bind comes after the tmpfs.
    std::vector<const WritableRoot*> binds;
    for (const auto& r : policy.writable_roots) {
        if (r.private_mount())
            a.insert(a.end(), {"--tmpfs", r.path});
        else
            binds.push_back(&r);
    }
    // Ancestors before descendants: a later bind of a parent would otherwise
    // cover an earlier bind of its child. Stable, so equal depths keep the
    // policy's order.
    std::stable_sort(binds.begin(), binds.end(),
                     [](const WritableRoot* x, const WritableRoot* y) { return depth(x->path) < depth(y->path); });
    // A root opened when the policy was built is bound through its
    // descriptor: bwrap mounts what /proc/self/fd/N is (the directory we
    // opened), not whatever the path names by the time it gets there.
    for (const auto* r : binds)
        a.insert(a.end(), {"--bind", r->fd >= 0 ? "/proc/self/fd/" + std::to_string(r->fd) : r->path, r->path});
    // The carve-outs (issue 18), after every root (carve_binds), unless the
    // stage binds them.
    if (!opts.stage_binds)
        for (const auto* e : carve_binds(policy))
            a.insert(a.end(), {e->pin ? "--bind" : "--ro-bind", "/proc/self/fd/" + std::to_string(e->fd), e->path});
    hide();
    return a;
}

bool hidden_within(const Policy& policy, const ProtectedPath& h) {
    return std::any_of(policy.hidden_paths.begin(), policy.hidden_paths.end(), [&](const ProtectedPath& d) {
        return d.exists && d.directory && h.path.size() > d.path.size() &&
               h.path.compare(0, d.path.size(), d.path) == 0 && (d.path == "/" || h.path[d.path.size()] == '/');
    });
}

std::vector<const ProtectedPath*> carve_binds(const Policy& policy) {
    std::vector<const ProtectedPath*> carve;
    if (policy.mode != Mode::WorkspaceWrite) return carve;
    for (const auto& e : policy.protected_paths)
        if (e.exists && e.fd >= 0 && !e.watched) carve.push_back(&e);
    std::stable_sort(carve.begin(), carve.end(),
                     [](const ProtectedPath* x, const ProtectedPath* y) { return depth(x->path) < depth(y->path); });
    return carve;
}

bool stage_may_bind(const Policy& policy) {
    if (std::none_of(policy.hidden_paths.begin(), policy.hidden_paths.end(), [](const ProtectedPath& h) { return h.exists; }))
        return true;
    for (const auto* e : carve_binds(policy))
        for (const auto& h : policy.hidden_paths)
            if (h.exists && (within(e->path, h.path) || within(h.path, e->path))) return false;
    return true;
}

std::vector<std::string> stage_args(const Policy& policy, const StageSpec& spec) {
    std::vector<std::string> a = {spec.self, kStageArg, "--mode", std::string(to_string(policy.mode))};
    if (spec.landlock_abi > 0) a.insert(a.end(), {"--landlock", std::to_string(spec.landlock_abi)});
    if (policy.network != Network::Host) a.insert(a.end(), {"--net", std::string(to_string(policy.network))});
    if (policy.allow_userns) a.push_back("--allow-userns");
    if (spec.report_fd >= 0) a.insert(a.end(), {"--report-fd", std::to_string(spec.report_fd)});
    if (spec.record_fd >= 0) a.insert(a.end(), {"--record-fd", std::to_string(spec.record_fd)});
    if (spec.relay_fd >= 0) a.insert(a.end(), {"--net-relay", std::to_string(spec.relay_fd), "--no-proxy", spec.no_proxy});
    for (int fd : policy.keep_fds) a.insert(a.end(), {"--keep-fd", std::to_string(fd)});
    for (const auto& r : spec.rlimits)
        a.insert(a.end(), {"--rlimit", fmt::format("{}:{}:{}", r.resource, r.soft, r.hard)});
    for (const auto& f : policy.writable_files) a.insert(a.end(), {"--file", f});
    for (const auto& r : policy.writable_roots)
        a.insert(a.end(), {"--rw", std::string(to_string(r.source)), r.path, std::to_string(r.fd)});
    // Where bwrap binds the carve-outs, the stage still gets the list, to
    // check that each bind landed on its place (--carves-bound): bwrap
    // before 0.12 follows a symlink on the way to a mount point, and one can
    // be planted inside a writable root between the walk and bwrap's bind.
    if (spec.behind) a.push_back("--behind");
    if (spec.carve_late) a.push_back("--carve-late");
    else {
        auto carves = carve_binds(policy);
        // A carve-out at or below a hidden path is covered by the hiding
        // (bwrap hides after its binds): nothing of it to check.
        if (!spec.stage_binds)
            carves.erase(std::remove_if(carves.begin(), carves.end(),
                                        [&](const ProtectedPath* e) {
                                            return std::any_of(policy.hidden_paths.begin(), policy.hidden_paths.end(),
                                                               [&](const ProtectedPath& h) {
                                                                   return h.exists && within(e->path, h.path);
                                                               });
                                        }),
                         carves.end());
        if (!spec.stage_binds && !carves.empty()) a.push_back("--carves-bound");
        for (const auto* e : carves)
            a.insert(a.end(), {"--carve", e->pin ? "pin" : "ro", e->path, fmt::format("{}:{}", e->dev, e->ino)});
    }
    const bool inline_argv = spec.argv.size() <= kArgvInline;
    if (!inline_argv) a.push_back("--argv-from-record");
    a.push_back("--");
    a.push_back(spec.command_path);
    if (inline_argv) a.insert(a.end(), spec.argv.begin(), spec.argv.end());
    return a;
}

std::vector<std::string> wrap(const std::string& bwrap_path, const std::vector<std::string>& profile,
                              const std::vector<std::string>& tail) {
    std::vector<std::string> a;
    a.reserve(profile.size() + tail.size() + 2);
    a.push_back(bwrap_path);
    a.insert(a.end(), profile.begin(), profile.end());
    a.push_back("--");
    a.insert(a.end(), tail.begin(), tail.end());
    return a;
}

void add_json_status_fd(std::vector<std::string>& argv, int fd) {
    const auto at = argv.empty() ? argv.end() : argv.begin() + 1;
    argv.insert(at, {"--json-status-fd", std::to_string(fd)});
}

Layer layer(const Policy& policy, const std::string& bwrap_path) {
    Layer l;
    l.name = "bwrap";
    // Both are own file effects that a read-only bind does not stop; the
    // Landlock stage closes them where the kernel has it.
    l.gaps.push_back({"fifo-writes", "a read-only bind does not stop opening a host FIFO outside the writable roots "
                                     "for writing (no file system write happens)", true});
    l.gaps.push_back({"proc-fd-reopen", "a file outside the writable roots that the command was given as an fd "
                                        "(stdin redirected from it) can be reopened for writing through "
                                        "/proc/self/fd, which reaches the host mount", true});
    // Only seccomp's read-only filter stops this one; the mount view cannot,
    // because the fd's mount is the host's.
    if (policy.mode == Mode::WorkspaceWrite)
        l.gaps.push_back({"metadata", "chmod, chown, utimes or extended attributes on a file the command was given "
                                      "as an fd (its terminal, a redirected file) change the host's file", true});
    const bool host_net = policy.network == Network::Host;  // else the network record says how
    if (host_net)
        l.gaps.push_back({"unix-sockets", "connecting to a host daemon's unix socket is not governed; the daemon may "
                                          "write on the command's behalf", false});
    l.gaps.push_back({"file-locks", "locks and leases on host files the command can read can make host processes "
                                    "wait", false});
    if (host_net) {
        l.gaps.push_back({"abstract-unix-sockets", "without a network namespace, abstract unix sockets of host "
                                                   "processes can be reached", false});
        l.gaps.push_back({"network", "network access is not governed: --net host (the default) leaves TCP, UDP and "
                                     "unix sockets as the host has them", false});
    }
    l.enforcement = Enforcement::Partial;
    l.details["path"] = bwrap_path;
    l.details["namespaces"] = host_net ? nlohmann::json{"mount", "pid", "ipc"} : nlohmann::json{"mount", "pid", "ipc", "net"};
    l.details["tmpIsTmpfs"] = policy.mode != Mode::DangerFullAccess && policy.private_tmp;
    return l;
}

std::vector<std::string> custom_argv(const std::vector<std::string>& runner_command, const Policy& policy,
                                     const std::vector<std::string>& argv) {
    std::vector<std::string> a(runner_command);
    // The operator's profile names no descriptor of ours: the runner would
    // have to be given each one, and a runner that does not close them (bwrap
    // itself does not) hands them to the command, where a directory's
    // descriptor on the host's mount reaches past every bind ("..").
    // So the roots are bound by path, checked just before the exec
    // (custom_runner.cpp), and the carve-outs are left out.
    Policy by_path = policy;
    by_path.protected_paths.clear();
    by_path.hidden_paths.clear();
    for (auto& r : by_path.writable_roots) r.fd = -1;
    const auto profile = profile_args(by_path, {});
    a.insert(a.end(), profile.begin(), profile.end());
    a.push_back("--");
    a.insert(a.end(), argv.begin(), argv.end());
    return a;
}

[[gnu::hot]] bool loader_variable(std::string_view name) {
    // PWD too: bwrap sets it for its child; the command gets the caller's (or none).
    if (name == "PWD") return true;
    if (name.rfind("LD_", 0) == 0) return true;
    for (const char* v : {"GCONV_PATH", "GLIBC_TUNABLES", "MALLOC_TRACE", "LOCPATH", "NLSPATH"})
        if (name == v) return true;
    return false;
}

std::vector<std::string> stash_loader_env(const std::vector<std::string>& env) {
    std::vector<std::string> out;
    out.reserve(env.size());
    for (const auto& e : env) {
        const auto eq = e.find('=');
        const std::string_view name = std::string_view(e).substr(0, eq);
        // A stash name already present would be restored for the command:
        // harmless (the caller could have set the real name), but dropped so
        // the command sees exactly the caller's environment.
        if (name.rfind(kStashPrefix, 0) == 0) continue;
        out.push_back(loader_variable(name) ? kStashPrefix + e : e);
    }
    return out;
}

[[gnu::hot]] std::vector<char*> unstash_loader_envp(char* const* env) {
    std::vector<char*> out;
    const size_t n = std::char_traits<char>::length(kStashPrefix);
    for (char* const* p = env; p && *p; ++p) {
        const std::string_view e(*p);
        if (e.rfind("PWD=", 0) == 0) continue;  // bwrap's, not the caller's
        if (e.rfind(kStashPrefix, 0) == 0) {
            // The real entry is the stashed one's tail: no copy.
            const std::string_view real = e.substr(n);
            if (loader_variable(real.substr(0, real.find('=')))) out.push_back(*p + n);
            continue;
        }
        out.push_back(*p);
    }
    out.push_back(nullptr);
    return out;
}

std::vector<std::string> unstash_loader_env(const std::vector<std::string>& env) {
    std::vector<char*> in;
    in.reserve(env.size() + 1);
    for (const auto& e : env) in.push_back(const_cast<char*>(e.c_str()));
    in.push_back(nullptr);
    std::vector<std::string> out;
    for (char* e : unstash_loader_envp(in.data()))
        if (e) out.emplace_back(e);
    return out;
}

namespace {

// One carve-out as the launcher writes it: "ro" or "pin", an absolute path, DEV:INO.
bool parse_carve(std::string_view kind, std::string_view path, std::string_view id, StageRequest::Carve& c) {
    const size_t colon = id.find(':');
    if ((kind != "pin" && kind != "ro") || path.empty() || path[0] != '/' || colon == std::string_view::npos ||
        !parse_u64(id.substr(0, colon), c.dev) || !parse_u64(id.substr(colon + 1), c.ino))
        return false;
    c.path = std::string(path);
    c.pin = kind == "pin";
    return true;
}

}  // namespace

std::vector<int> settle_carve_outs(Confinement& c, bool stage_binds, bool late) {
    std::vector<int> carve_fds;
    const auto& pp = c.policy.protected_paths;
    if (!c.layers.empty()) {
        if (std::any_of(pp.begin(), pp.end(), [](const ProtectedPath& e) { return e.watched && e.exists; }))
            c.layers.front().gaps.push_back({"protected-paths", "a submodule's git config stays writable (git "
                                                                "submodule update rewrites it); a change is reported "
                                                                "by --supervise's integrity check",
                                             true});
        // Who binds them: the report says, for the benchmark and the curious.
        if (!carve_binds(c.policy).empty()) c.layers.front().details["carveOutBinds"] = stage_binds ? "stage" : "bwrap";
    }
    // The Landlock stage's layer, planned before the list was there.
    if (late && c.layers.size() > 1 &&
        std::any_of(pp.begin(), pp.end(), [](const ProtectedPath& e) { return e.exists && e.fd >= 0; })) {
        // Where landlock::plan puts it when the list is there first: before
        // the process-group gap the runner adds after the plan (one record,
        // walked early or late).
        auto& gaps = c.layers[1].gaps;
        gaps.insert(std::find_if(gaps.begin(), gaps.end(), [](const Gap& g) { return g.effect == "process-group"; }),
                    landlock::protected_paths_gap());
        c.layers[1].enforcement = Enforcement::Partial;
    }
    // Where bwrap binds them, each one's descriptor crosses bwrap (the stage
    // closes it before the command runs); the stage binds by path and checks
    // the launcher's device and inode, while the launcher holds the
    // descriptor. What is absent gets nothing.
    for (auto& e : c.policy.protected_paths) {
        if (!e.why_not.empty()) continue;  // outside the roots, or only watched
        if (e.exists && e.fd >= 0) {
            e.enforced = e.pin ? "mount-point" : "read-only-bind";
            if (!stage_binds) carve_fds.push_back(e.fd);
        } else {
            e.why_not = kProtectedAbsentText;
        }
    }
    for (auto& h : c.policy.hidden_paths) {
        if (h.exists) h.enforced = h.directory || hidden_within(c.policy, h) ? "empty-tmpfs" : "dev-null-bind";
        else h.why_not = kHiddenAbsentText;
        for (const auto& s : h.shown) carve_fds.push_back(s.second);
    }
    return carve_fds;
}

std::string carve_list(const Policy& policy) {
    std::string out;
    for (const auto* e : carve_binds(policy)) {
        out += e->pin ? "pin" : "ro";
        out += '\0';
        out += e->path;
        out += '\0';
        out += fmt::format("{}:{}", e->dev, e->ino);
        out += '\0';
    }
    return out;
}

bool parse_carve_list(std::string_view list, std::vector<StageRequest::Carve>& out) {
    while (!list.empty()) {
        std::string_view f[3];
        for (auto& x : f) {
            const size_t end = list.find('\0');
            if (end == std::string_view::npos) return false;
            x = list.substr(0, end);
            list.remove_prefix(end + 1);
        }
        StageRequest::Carve c;
        if (!parse_carve(f[0], f[1], f[2], c)) return false;
        out.push_back(std::move(c));
    }
    return true;
}

[[gnu::hot]] Outcome parse_stage(const std::vector<std::string>& args, StageRequest& out) {
    out = StageRequest{};
    bool have_mode = false;
    size_t i = 0;
    auto value = [&](const char* opt, std::string& v) -> Outcome {
        if (i + 1 >= args.size()) return failf(Err::Usage, "stage: {} needs a value", opt);
        v = args[++i];
        return Outcome::success();
    };
    for (; i < args.size(); ++i) {
        // Compared as views: the comparisons inline, nothing out of line to page in.
        const std::string_view a = args[i];
        std::string v;
        if (a == "--") {
            ++i;
            break;
        } else if (a == "--mode") {
            if (auto o = value("--mode", v); !o) return o;
            auto m = parse_mode(v);
            if (!m || *m == Mode::DangerFullAccess) return failf(Err::Usage, "stage: bad mode \"{}\"", v);
            out.policy.mode = *m;
            have_mode = true;
        } else if (a == "--net") {
            if (auto o = value("--net", v); !o) return o;
            auto n = parse_network(v);
            if (!n) return failf(Err::Usage, "stage: bad network mode \"{}\"", v);
            out.policy.network = *n;
        } else if (a == "--no-proxy") {
            if (auto o = value("--no-proxy", out.no_proxy); !o) return o;
        } else if (a == "--landlock" || a == "--report-fd" || a == "--record-fd" || a == "--keep-fd" ||
                   a == "--net-relay" || a == "--ready-fd" || a == "--pty-fd") {
            if (auto o = value(a.data(), v); !o) return o;  // a whole std::string: NUL-terminated
            int n = 0;
            if (!parse_int(v, n)) return failf(Err::Usage, "stage: bad number \"{}\" for {}", v, a);
            if (a == "--landlock") out.landlock_abi = n;
            else if (a == "--report-fd") out.report_fd = n;
            else if (a == "--record-fd") out.record_fd = n;
            else if (a == "--net-relay") out.relay_fd = n;
            else if (a == "--ready-fd") out.ready_fd = n;
            else if (a == "--pty-fd") out.pty_fd = n;
            else out.policy.keep_fds.push_back(n);
        } else if (a == "--rlimit") {
            if (auto o = value("--rlimit", v); !o) return o;
            // RES:SOFT:HARD, all decimal.
            limits::Rlimit r;
            const size_t c1 = v.find(':'), c2 = c1 == std::string::npos ? c1 : v.find(':', c1 + 1);
            int res = 0;
            if (c2 == std::string::npos || !parse_int(v.substr(0, c1), res) || res < 0 ||
                !parse_u64(std::string_view(v).substr(c1 + 1, c2 - c1 - 1), r.soft) ||
                !parse_u64(std::string_view(v).substr(c2 + 1), r.hard))
                return failf(Err::Usage, "stage: bad --rlimit \"{}\"", v);
            r.resource = res;
            out.rlimits.push_back(r);
        } else if (a == "--caller-signals") {
            if (auto o = value("--caller-signals", v); !o) return o;
            int n = 0;
            if (!parse_int(v, n) || n < 0) return failf(Err::Usage, "stage: bad number \"{}\" for {}", v, a);
            out.caller_signals = n;
        } else if (a == "--argv-from-record") {
            out.argv_from_record = true;
        } else if (a == "--file") {
            if (auto o = value("--file", v); !o) return o;
            out.policy.writable_files.push_back(v);
        } else if (a == "--rw") {
            std::string source, path, fd;
            if (auto o = value("--rw", source); !o) return o;
            if (auto o = value("--rw", path); !o) return o;
            if (auto o = value("--rw", fd); !o) return o;
            if (path.empty() || path[0] != '/') return failf(Err::Usage, "stage: --rw path must be absolute");
            const auto grant = parse_grant(source);
            if (!grant) return failf(Err::Usage, "stage: bad source \"{}\" for --rw", source);
            WritableRoot r{path, *grant, true};
            // -1: no descriptor (a root granted by path; the stage opens it).
            if (std::string_view(fd) != "-1" && !parse_int(fd, r.fd)) return failf(Err::Usage, "stage: bad fd \"{}\" for --rw", fd);
            out.policy.writable_roots.push_back(std::move(r));
        } else if (a == "--carve") {
            std::string kind, path, id;
            if (auto o = value("--carve", kind); !o) return o;
            if (auto o = value("--carve", path); !o) return o;
            if (auto o = value("--carve", id); !o) return o;
            StageRequest::Carve c;
            if (!parse_carve(kind, path, id, c)) return failf(Err::Usage, "stage: bad --carve {} {} {}", kind, path, id);
            out.carves.push_back(std::move(c));
        } else if (a == "--carve-late") {
            out.carve_late = true;
        } else if (a == "--behind") {
            out.behind = true;
        } else if (a == "--carves-bound") {
            out.carves_bound = true;
        } else if (a == "--allow-userns") {
            out.policy.allow_userns = true;
        } else {
            return failf(Err::Usage, "stage: unknown argument \"{}\"", a);
        }
    }
    if (!have_mode) return fail(Err::Usage, "stage: --mode is required");
    if (out.relay_fd >= 0 && (out.relay_fd < 3 || out.policy.network != Network::Loopback))
        return fail(Err::Usage, "stage: --net-relay needs a descriptor above 2 and --net loopback");
    if (out.record_fd < 3) return fail(Err::Usage, "stage: --record-fd is required");
    if (out.ready_fd != -1 && out.ready_fd < 3) return fail(Err::Usage, "stage: --ready-fd needs a descriptor above 2");
    if (out.pty_fd != -1 && out.pty_fd < 3) return fail(Err::Usage, "stage: --pty-fd needs a descriptor above 2");
    if (out.carve_late && (out.ready_fd < 3 || !out.carves.empty() || out.carves_bound))
        return fail(Err::Usage, "stage: --carve-late needs --ready-fd and no --carve");
    if (i >= args.size() || (i + 1 >= args.size() && !out.argv_from_record))
        return fail(Err::Usage, "stage: no command after --");
    out.command_path = args[i];
    out.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
    return Outcome::success();
}

[[gnu::hot]] Outcome check_mount_view(bool root_read_only) {
    if (root_read_only) return Outcome::success();
    return fail(Err::SandboxUnavailable, "bwrap did not build the sandbox: / is not mounted read-only");
}

}  // namespace dsh::bwrap
