// The self-test: escape attempts and must-work actions, each run through a
// dsh-confine binary as a separate process, judged from outside by looking at
// the file system. The binary under test is /proc/self/exe unless --binary
// names another one; that is how a test shows that a runner which does not
// confine is caught (nothing here can make the real runners weaker: the
// self-test only ever runs the binary, it never confines anything itself).
#include "selftest.hpp"
#include "bytes.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "policy.hpp"
#include "runner.hpp"
#include "spawn.hpp"

extern char** environ;

namespace dsh::selftest {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------- processes

struct Proc {
    int status = -1;  // exit status; 128+n for death by signal n
    bool timed_out = false;
    std::string out, err;
    std::vector<json> records;
    std::string report_error;  // a line of the report that is not JSON
};

struct Spawn {
    std::vector<std::string> argv;
    std::string cwd;
    std::vector<std::string> env;
    int stdin_fd = -1;  // default: /dev/null
    int leak_fd = -1;   // passed to the binary as fd 4, inheritable: must not reach the command
    bool pty = false;   // stdio on a new pty that is the controlling terminal
    int timeout_ms = 30000;
};

long now_ms() { return static_cast<long>(spawn::now_ms()); }

// Moves an fd out of the way of 0..4 (where the child puts things), close-on-exec.
int high(int fd) {
    if (fd < 0) return fd;
    int h = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
    ::close(fd);
    return h;
}

Proc spawn(const Spawn& s) {
    Proc p;
    int out[2] = {-1, -1}, err[2] = {-1, -1}, rep[2] = {-1, -1};
    int master = -1;
    std::string slave_name;
    if (::pipe2(rep, O_CLOEXEC) != 0) {
        p.err = fmt::format("pipe: {}", std::strerror(errno));
        return p;
    }
    rep[0] = high(rep[0]);
    rep[1] = high(rep[1]);
    if (s.pty) {
        master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0 || !::ptsname(master)) {
            p.err = "no pty";
            if (master >= 0) ::close(master);
            ::close(rep[0]);
            ::close(rep[1]);
            return p;
        }
        slave_name = ::ptsname(master);
        master = high(master);
    } else {
        if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
            p.err = fmt::format("pipe: {}", std::strerror(errno));
            return p;
        }
        for (int* fd : {&out[0], &out[1], &err[0], &err[1]}) *fd = high(*fd);
    }
    int in = s.stdin_fd >= 0 ? ::fcntl(s.stdin_fd, F_DUPFD_CLOEXEC, 10) : -1;
    int leak = s.leak_fd >= 0 ? ::fcntl(s.leak_fd, F_DUPFD_CLOEXEC, 10) : -1;

    auto argv = spawn::c_array(s.argv);
    auto envp = spawn::c_array(s.env);
    if (!s.pty && in < 0) in = high(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    const int pass[2] = {rep[1], leak};
    spawn::Child child;
    child.path = argv[0];
    child.argv = argv.data();
    child.envp = envp.data();
    if (s.pty) {
        child.terminal = slave_name.c_str();
    } else {
        child.new_group = true;
        child.stdin_fd = in;
        child.stdout_fd = out[1];
        child.stderr_fd = err[1];
    }
    child.pass_fds = pass;
    child.n_pass = leak >= 0 ? 2 : 1;
    child.close_others = true;
    child.cwd = s.cwd.empty() ? nullptr : s.cwd.c_str();
    const pid_t pid = spawn::start(child);
    for (int fd : {out[1], err[1], rep[1], in, leak})
        if (fd >= 0) ::close(fd);
    if (pid < 0) {
        p.err = fmt::format("fork: {}", std::strerror(errno));
        for (int fd : {out[0], err[0], rep[0], master})
            if (fd >= 0) ::close(fd);
        return p;
    }

    std::string rep_text;
    struct Src {
        int fd;
        std::string* to;
    };
    std::vector<Src> srcs;
    if (s.pty) srcs.push_back({master, &p.out});
    else {
        srcs.push_back({out[0], &p.out});
        srcs.push_back({err[0], &p.err});
    }
    srcs.push_back({rep[0], &rep_text});
    const long deadline = now_ms() + s.timeout_ms;
    long exited_at = -1;
    int wstatus = 0;
    bool reaped = false;
    while (true) {
        std::vector<pollfd> pf;
        for (const auto& x : srcs)
            if (x.fd >= 0) pf.push_back({x.fd, POLLIN, 0});
        if (pf.empty() && reaped) break;
        if (reaped && now_ms() - exited_at > 500) break;  // a background holder keeps a pipe open
        if (now_ms() > deadline) {
            ::kill(s.pty ? -pid : -pid, SIGKILL);
            ::kill(pid, SIGKILL);
            p.timed_out = true;
            if (!reaped) ::waitpid(pid, &wstatus, 0);
            reaped = true;
            break;
        }
        if (!pf.empty()) ::poll(pf.data(), pf.size(), 50);
        else ::usleep(20000);
        for (auto& x : srcs) {
            if (x.fd < 0) continue;
            char buf[8192];
            pollfd one{x.fd, POLLIN, 0};
            if (::poll(&one, 1, 0) <= 0) continue;
            ssize_t n = ::read(x.fd, buf, sizeof buf);
            if (n > 0) {
                if (x.to->size() < (1U << 20)) x.to->append(buf, static_cast<size_t>(n));
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                ::close(x.fd);  // EOF, or EIO on a pty whose slave is gone
                x.fd = -1;
            }
        }
        if (!reaped && ::waitpid(pid, &wstatus, WNOHANG) == pid) {
            reaped = true;
            exited_at = now_ms();
        }
    }
    for (auto& x : srcs)
        if (x.fd >= 0) ::close(x.fd);
    if (WIFEXITED(wstatus)) p.status = WEXITSTATUS(wstatus);
    else if (WIFSIGNALED(wstatus)) p.status = 128 + WTERMSIG(wstatus);
    for_each_line(rep_text, [&](std::string_view line) {
        if (line.empty()) return true;
        try {
            p.records.push_back(json::parse(line));
        } catch (const json::exception&) {
            if (p.report_error.empty()) p.report_error = line.substr(0, 200);
        }
        return true;
    });
    return p;
}

// ---------------------------------------------------------------- scratch

int rm_entry(const char* path, const struct stat*, int type, struct FTW*) {
    if (type == FTW_DP) return ::rmdir(path) == 0 || errno == ENOENT ? 0 : 0;
    ::unlink(path);
    return 0;
}

void remove_tree(const std::string& path) {
    // Directories the checks made unreadable are opened up first.
    ::chmod(path.c_str(), 0700);
    ::nftw(path.c_str(), rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

bool exists(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0;
}

std::string read_file(const std::string& p) {
    std::string s;
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return s;
}

bool write_file(const std::string& p, const std::string& text, mode_t mode = 0644) {
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return false;
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    return ok;
}

// A scratch directory that is not inside a directory the policy makes
// writable anyway (/tmp): "outside" must really be outside.
std::optional<std::string> make_scratch(std::string& why) {
    std::vector<std::string> parents = {"/var/tmp"};
    if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x == '/') parents.emplace_back(x);
    if (const char* h = std::getenv("HOME"); h && *h == '/') parents.emplace_back(h);
    const std::string tmp = canonical_path("/tmp", "/");
    for (const auto& parent : parents) {
        std::string canon = canonical_path(parent, "/");
        if (path_under(canon, tmp)) continue;
        std::string tmpl = canon + "/dsh-confine-self-test-XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        if (::mkdtemp(buf.data()) != nullptr) {
            ::chmod(buf.data(), 0755);
            return std::string(buf.data());
        }
        why += fmt::format("{}: {}; ", parent, std::strerror(errno));
    }
    return std::nullopt;
}

// ---------------------------------------------------------------- checks

struct Check {
    std::string name;
    std::string what;
    enum State { Held, Failed, NotApplicable } state = Held;
    std::string detail;
};

struct RunnerResult {
    std::string runner;
    bool usable = false;
    std::string reason;  // why not usable
    std::vector<Check> checks;
    json confinement;  // the record of the report check
    bool failed() const {
        if (!usable) return true;
        return std::any_of(checks.begin(), checks.end(), [](const Check& c) { return c.state == Check::Failed; });
    }
};

struct Ctx {
    std::string binary;  // under test
    std::string self;    // this program, the payload for --attempt
    std::string runner;
    std::optional<std::string> config;
    std::string base, ws, outside, tmpdir;
    std::vector<std::string> env;
    int seq = 0;

    std::string fresh(const std::string& where, const std::string& stem) {
        return fmt::format("{}/{}-{}", where, stem, ++seq);
    }

    // `opts`: more options of dsh-confine's, before the command (--net off, --protect P).
    std::vector<std::string> head(const std::string& mode, const std::vector<std::string>& opts = {}) const {
        std::vector<std::string> a = {binary, "--report-fd", "3", "--runner", runner, "--mode", mode, "--root", ws};
        if (config) {
            a.push_back("--config");
            a.push_back(*config);
        }
        a.insert(a.end(), opts.begin(), opts.end());
        a.push_back("--");
        return a;
    }

    // dsh-confine ... -- /bin/sh -c SCRIPT self-test ARGS...: paths travel as
    // arguments ($1, $2...), never inside the script text.
    Proc sh(const std::string& mode, const std::string& script, const std::vector<std::string>& args = {},
            Spawn sp = {}, const std::vector<std::string>& opts = {}) const {
        sp.argv = head(mode, opts);
        for (const char* a : {"/bin/sh", "-c"}) sp.argv.emplace_back(a);
        sp.argv.push_back(script);
        sp.argv.emplace_back("self-test");
        sp.argv.insert(sp.argv.end(), args.begin(), args.end());
        if (sp.cwd.empty()) sp.cwd = ws;
        sp.env = env;
        return spawn(sp);
    }
};

std::string brief(const Proc& p) {
    if (p.timed_out) return "timed out";
    std::string e = p.err;
    while (!e.empty() && (e.back() == '\n' || e.back() == '\r')) e.pop_back();
    if (auto nl = e.rfind('\n'); nl != std::string::npos) e = e.substr(nl + 1);
    if (e.size() > 160) e = e.substr(0, 160) + "...";
    return fmt::format("exit {}{}{}", p.status, e.empty() ? "" : ": ", e);
}

const json* record(const Proc& p, const char* type) {
    for (const auto& r : p.records)
        if (r.is_object() && r.value("type", "") == type) return &r;
    return nullptr;
}

Check held(std::string name, std::string what, std::string detail = {}) {
    return {std::move(name), std::move(what), Check::Held, std::move(detail)};
}
Check failed(std::string name, std::string what, std::string detail) {
    return {std::move(name), std::move(what), Check::Failed, std::move(detail)};
}
Check na(std::string name, std::string what, std::string detail) {
    return {std::move(name), std::move(what), Check::NotApplicable, std::move(detail)};
}

Check check_report(Ctx& c, RunnerResult& rr) {
    const char* what = "the confinement record parses and matches the run";
    Proc p = c.sh("workspace-write", "exit 0");
    if (p.status != 0) return failed("report", what, brief(p));
    if (!p.report_error.empty()) return failed("report", what, "a report line is not JSON: " + p.report_error);
    const json* r = record(p, "confinement");
    if (!r) return failed("report", what, "no confinement record on the report fd");
    if (p.records.size() != 1) return failed("report", what, fmt::format("{} records, expected 1", p.records.size()));
    rr.confinement = *r;
    auto str = [&](const char* k) { return r->contains(k) && (*r)[k].is_string() ? (*r)[k].get<std::string>() : ""; };
    if (r->value("version", 0) != 1) return failed("report", what, "version is not 1");
    if (str("mode") != "workspace-write") return failed("report", what, "mode is \"" + str("mode") + "\"");
    if (c.runner != "auto" && str("runner") != c.runner)
        return failed("report", what, "runner is \"" + str("runner") + "\"");
    if (str("workspaceRoot") != c.ws) return failed("report", what, "workspaceRoot is \"" + str("workspaceRoot") + "\"");
    if (str("enforcement") != "full" && str("enforcement") != "partial")
        return failed("report", what, "enforcement is \"" + str("enforcement") + "\"");
    bool ws_listed = false;
    if (r->contains("writableRoots") && (*r)["writableRoots"].is_array())
        for (const auto& w : (*r)["writableRoots"])
            ws_listed = ws_listed || (w.is_object() && w.value("path", "") == c.ws);
    if (!ws_listed) return failed("report", what, "the workspace is not among writableRoots");
    return held("report", what, fmt::format("runner {}, enforcement {}", str("runner"), str("enforcement")));
}

Check check_exit_status(Ctx& c) {
    const char* what = "the command's exit status comes back unchanged";
    Proc p = c.sh("read-only", "exit 7");
    if (p.status != 7) return failed("exit-status", what, brief(p));
    return held("exit-status", what);
}

Check check_write_inside(Ctx& c) {
    const char* what = "workspace-write: a write inside the workspace lands";
    std::string f = c.fresh(c.ws, "inside");
    Proc p = c.sh("workspace-write", "printf ok > \"$1\"", {f});
    if (read_file(f) != "ok") return failed("write-inside", what, "the file is not there: " + brief(p));
    return held("write-inside", what);
}

Check check_write_outside(Ctx& c) {
    const char* what = "workspace-write: a write outside the writable roots is refused";
    std::string f = c.fresh(c.outside, "w");
    Proc p = c.sh("workspace-write", "printf x > \"$1\"", {f});
    if (exists(f)) return failed("write-outside", what, "the file was created outside: " + f);
    return held("write-outside", what);
}

Check check_read_only(Ctx& c) {
    const char* what = "read-only: a write into the workspace is refused";
    std::string f = c.fresh(c.ws, "ro");
    Proc p = c.sh("read-only", "printf x > \"$1\"; mkdir \"$1.d\"", {f});
    if (exists(f) || exists(f + ".d")) return failed("read-only", what, "the workspace was written to");
    return held("read-only", what);
}

Check check_dev_null(Ctx& c) {
    const char* what = "read-only: /dev/null stays writable";
    Proc p = c.sh("read-only", "printf x > /dev/null");
    if (p.status != 0) return failed("dev-null", what, brief(p));
    return held("dev-null", what);
}

Check check_tmp(Ctx& c, const RunnerResult& rr) {
    const char* what = "/tmp and $TMPDIR: writable in workspace-write, refused in read-only";
    const std::string name = fmt::format("/tmp/dsh-confine-self-test-{}-{}", ::getpid(), ++c.seq);
    const std::string t1 = c.fresh(c.tmpdir, "t");
    ::unlink(name.c_str());
    Proc ro = c.sh("read-only", "printf x > \"$1\"; printf x > \"$2\"", {name, t1});
    if (exists(name) || exists(t1)) {
        ::unlink(name.c_str());
        return failed("tmp", what, "read-only wrote to /tmp or $TMPDIR");
    }
    Proc ww = c.sh("workspace-write", "printf x > \"$1\" && printf x > \"$2\"", {name, t1});
    bool persists = true;
    if (rr.confinement.contains("writableRoots") && rr.confinement["writableRoots"].is_array())
        for (const auto& w : rr.confinement["writableRoots"])
            if (w.is_object() && w.value("path", "") == "/tmp") persists = w.value("persists", true);
    const bool tmp_there = exists(name);
    ::unlink(name.c_str());
    if (ww.status != 0) return failed("tmp", what, "workspace-write could not write /tmp or $TMPDIR: " + brief(ww));
    if (!exists(t1)) return failed("tmp", what, "the $TMPDIR write did not land");
    if (persists && !tmp_there) return failed("tmp", what, "the /tmp write did not land though the report says it persists");
    if (!persists && tmp_there) return failed("tmp", what, "the report says /tmp is private, yet the write reached the host's /tmp");
    return held("tmp", what, persists ? "" : "/tmp is private to the command");
}

Check check_symlink(Ctx& c) {
    const char* what = "symlinks in the workspace that point outside do not lead out";
    std::string dir = c.fresh(c.outside, "sd");
    std::string target = c.fresh(c.outside, "target");
    ::mkdir(dir.c_str(), 0755);
    write_file(target, "orig");
    std::string dl = c.fresh(c.ws, "dirlink"), fl = c.fresh(c.ws, "filelink");
    if (::symlink(dir.c_str(), dl.c_str()) != 0 || ::symlink(target.c_str(), fl.c_str()) != 0)
        return failed("symlink-escape", what, fmt::format("cannot make the links: {}", std::strerror(errno)));
    c.sh("workspace-write", "printf x > \"$1/new\"; printf x > \"$2\"; printf x >> \"$2\"", {dl, fl});
    if (exists(dir + "/new")) return failed("symlink-escape", what, "a file was created through a directory link");
    if (read_file(target) != "orig") return failed("symlink-escape", what, "a file outside was changed through a link");
    return held("symlink-escape", what);
}

Check check_links_and_renames(Ctx& c) {
    const char* what = "hard links and renames across the boundary are refused";
    std::string o = c.fresh(c.outside, "o"), i = c.fresh(c.ws, "i");
    write_file(o, "out");
    write_file(i, "in");
    std::string hl = c.fresh(c.ws, "hl"), hl2 = c.fresh(c.outside, "hl2"), moved_out = c.fresh(c.outside, "i");
    std::string moved_in = c.fresh(c.ws, "moved");
    c.sh("workspace-write", "ln \"$1\" \"$2\"; ln \"$3\" \"$4\"; mv \"$3\" \"$5\"; mv \"$1\" \"$6\"",
         {o, hl, i, hl2, moved_out, moved_in});
    struct stat st {};
    if (exists(hl)) return failed("link-rename", what, "a hard link to an outside file was made inside");
    if (exists(hl2)) return failed("link-rename", what, "a hard link was made outside");
    if (exists(moved_out) || !exists(i)) return failed("link-rename", what, "a file was renamed out of the workspace");
    // Under bwrap the rename is EXDEV and mv falls back to copy + unlink: the
    // copy (a read, which every mode allows) lands, the unlink is refused. A
    // rename happened only if the outside file is gone.
    if (!exists(o)) return failed("link-rename", what, "a file was renamed into the workspace from outside");
    if (::stat(o.c_str(), &st) != 0 || st.st_nlink != 1 || read_file(o) != "out")
        return failed("link-rename", what, "the outside file changed");
    return held("link-rename", what);
}

Check check_grandchild(Ctx& c) {
    const char* what = "processes the command starts are confined too";
    std::string f = c.fresh(c.outside, "gc");
    // Two levels down, each a new process: sh -> sh -> sh, the last one writes.
    c.sh("workspace-write", "/bin/sh -c \"$2\" g \"$1\"", {f, "/bin/sh -c 'printf x > \"$1\"' gc \"$1\""});
    if (exists(f)) return failed("grandchild", what, "a grandchild wrote outside");
    return held("grandchild", what);
}

Check check_inherited_fd(Ctx& c) {
    const char* what = "an inherited writable fd is closed before the command starts";
    std::string f = c.fresh(c.outside, "fd");
    int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return failed("inherited-fd", what, fmt::format("open: {}", std::strerror(errno)));
    Spawn sp;
    sp.leak_fd = fd;
    Proc p = c.sh("workspace-write", "printf leak >&4", {}, sp);
    ::close(fd);
    if (!read_file(f).empty()) return failed("inherited-fd", what, "the command wrote through fd 4");
    return held("inherited-fd", what);
}

Check check_proc_fd(Ctx& c) {
    const char* what = "a read-only stdin cannot be reopened for writing through /proc/self/fd";
    std::string f = c.fresh(c.outside, "stdin");
    write_file(f, "orig");
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    Spawn sp;
    sp.stdin_fd = fd;
    c.sh("workspace-write", "printf pwned > /proc/self/fd/0", {}, sp);
    ::close(fd);
    if (read_file(f) != "orig") return failed("proc-fd-reopen", what, "the file behind stdin was overwritten");
    return held("proc-fd-reopen", what);
}

void check_privileges(Ctx& c, std::vector<Check>& out) {
    const char* what_caps = "the command holds no capabilities";
    const char* what_nnp = "no_new_privs is set for the command";
    Proc p = c.sh("read-only", "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status");
    if (p.status != 0) {
        out.push_back(failed("no-capabilities", what_caps, brief(p)));
        out.push_back(failed("no-new-privs", what_nnp, brief(p)));
        return;
    }
    std::string caps_bad, nnp;
    const bool root = ::getuid() == 0 || ::geteuid() == 0;
    for_each_line(p.out, [&](std::string_view line) {
        auto colon = line.find(':');
        if (colon == std::string::npos) return true;
        std::string k(line.substr(0, colon)), v(line.substr(colon + 1));
        v.erase(0, v.find_first_not_of(" \t"));
        if (k == "NoNewPrivs") nnp = v;
        else if (std::strtoull(v.c_str(), nullptr, 16) != 0 && (k != "CapBnd" || root))
            caps_bad += k + "=" + v + " ";
        return true;
    });
    out.push_back(caps_bad.empty() ? held("no-capabilities", what_caps)
                                   : failed("no-capabilities", what_caps, "left: " + caps_bad));
    out.push_back(nnp == "1" ? held("no-new-privs", what_nnp)
                             : failed("no-new-privs", what_nnp, "NoNewPrivs is \"" + nnp + "\""));
}

Check check_device_node(Ctx& c) {
    const char* what = "device nodes cannot be made in a writable root";
    std::string f = c.fresh(c.ws, "nod");
    c.sh("workspace-write", "mknod \"$1\" c 1 3", {f});
    if (exists(f)) return failed("device-node", what, "a character device was created in the workspace");
    return held("device-node", what);
}

// Metadata outside the roots: refused, or the report is honest about it.
Check check_metadata(Ctx& c, const std::string& mode) {
    const std::string name = "metadata-" + mode;
    const std::string what = mode + ": metadata outside is refused, or the report says partial and names it";
    std::string f = c.fresh(c.outside, "meta");
    write_file(f, "x");
    ::chmod(f.c_str(), 0644);
    timespec times[2] = {{1000000, 0}, {1000000, 0}};
    ::utimensat(AT_FDCWD, f.c_str(), times, 0);
    Proc p = c.sh(mode, "chmod 600 \"$1\"; touch -m \"$1\"", {f});
    struct stat st {};
    ::stat(f.c_str(), &st);
    const bool changed = (st.st_mode & 07777) != 0644 || st.st_mtime != 1000000;
    if (!changed) return held(name, what);
    const json* r = record(p, "confinement");
    bool named = false;
    if (r && r->value("enforcement", "") == "partial" && r->contains("gaps") && (*r)["gaps"].is_array())
        for (const auto& g : (*r)["gaps"])
            named = named || (g.is_object() && g.value("effect", "") == "metadata" && g.value("ownEffect", false));
    if (named) return held(name, what, "changed, and the report says partial with the metadata gap named");
    return failed(name, what, "metadata outside changed while the report claims it is governed");
}

Check check_tiocsti(Ctx& c) {
    const char* what = "the command cannot push input into the terminal (TIOCSTI)";
    Spawn sp;
    sp.pty = true;
    sp.env = c.env;
    sp.cwd = c.ws;
    sp.timeout_ms = 20000;
    sp.argv = {c.binary, "--mode", "danger-full-access", "--", c.self, "self-test", "--attempt", "tiocsti"};
    Proc base = spawn(sp);
    if (base.out.find("tiocsti=ok") == std::string::npos) {
        std::string o = base.out;
        o.erase(std::remove(o.begin(), o.end(), '\r'), o.end());
        while (!o.empty() && o.back() == '\n') o.pop_back();
        return na("tiocsti", what, "TIOCSTI does not work here even unconfined: " + (o.empty() ? brief(base) : o));
    }
    sp.argv = c.head("read-only");
    for (const auto& a : {c.self, std::string("self-test"), std::string("--attempt"), std::string("tiocsti")})
        sp.argv.push_back(a);
    Proc p = spawn(sp);
    if (p.out.find("tiocsti=") == std::string::npos) return failed("tiocsti", what, "the attempt did not run: " + brief(p));
    if (p.out.find("tiocsti=ok") != std::string::npos) return failed("tiocsti", what, "TIOCSTI succeeded");
    return held("tiocsti", what);
}

// A refusal to run because this runner cannot enforce what was asked
// (a protected or hidden path under Landlock alone): fail closed, so held.
bool refused_unenforceable(const Proc& p) {
    const json* e = record(p, "error");
    return p.status == 125 && e && e->value("code", "") == "PROTECTION_UNAVAILABLE";
}

// A loopback listener of the self-test's own, on the host: whatever reaches
// it is counted by accepting without blocking after the run.
struct Listener {
    int fd = -1;
    int port = 0;
    Listener() {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t n = sizeof a;
        if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0) {
            if (fd >= 0) ::close(fd);
            fd = -1;
            return;
        }
        port = ntohs(a.sin_port);
    }
    ~Listener() {
        if (fd >= 0) ::close(fd);
    }
    int reached() const {
        int count = 0;
        for (int c; (c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; ++count) ::close(c);
        return count;
    }
};

Check check_network(Ctx& c) {
    const char* what = "--net off: a loopback listener on the host gets no connection";
    Listener l;
    if (l.fd < 0) return na("net-off", what, fmt::format("no loopback listener here: {}", std::strerror(errno)));
    const std::string attempt = fmt::format("connect={}", l.port);
    Spawn sp;
    sp.env = c.env;
    sp.cwd = c.ws;
    sp.argv = {c.binary, "--mode", "danger-full-access", "--", c.self, "self-test", "--attempt", attempt};
    Proc base = spawn(sp);
    if (l.reached() == 0)
        return na("net-off", what, "the listener cannot be reached even unconfined: " + brief(base));
    sp.argv = c.head("workspace-write", {"--net", "off"});
    for (const auto& a : {c.self, std::string("self-test"), std::string("--attempt"), attempt}) sp.argv.push_back(a);
    Proc p = spawn(sp);
    const int n = l.reached();
    if (n > 0) return failed("net-off", what, fmt::format("{} connection(s) reached the host's listener", n));
    if (p.out.find("connect=") == std::string::npos) return failed("net-off", what, "the attempt did not run: " + brief(p));
    return held("net-off", what);
}

Check check_protected(Ctx& c) {
    const char* what = "workspace-write: a --protect path inside the workspace stays read-only";
    const std::string f = c.fresh(c.ws, "protected");
    write_file(f, "orig");
    Proc p = c.sh("workspace-write", "printf x > \"$1\"; printf x >> \"$1\"; rm -f \"$1\"", {f}, {},
                  {"--protect", f});
    if (read_file(f) != "orig") return failed("protected-path", what, "the protected file was changed or removed");
    if (refused_unenforceable(p)) return held("protected-path", what, "refused to run: this runner cannot enforce it");
    return held("protected-path", what);
}

Check check_hidden(Ctx& c) {
    const char* what = "--deny-read: a hidden file's contents do not reach the command";
    const std::string f = c.fresh(c.outside, "hidden");
    const std::string marker = fmt::format("dsh-confine-self-test-secret-{}", ::getpid());
    write_file(f, marker + "\n");
    Proc p = c.sh("read-only", "cat \"$1\"", {f}, {}, {"--deny-read", f});
    if (p.out.find(marker) != std::string::npos) return failed("hidden-path", what, "the command read the hidden file");
    if (refused_unenforceable(p)) return held("hidden-path", what, "refused to run: this runner cannot hide it");
    if (p.status == 125) return failed("hidden-path", what, "the run failed: " + brief(p));
    return held("hidden-path", what);
}

Check check_file_size(Ctx& c) {
    const char* what = "--file-size 4K: a file the command writes stops at 4 KiB";
    const std::string f = c.fresh(c.ws, "big");
    Proc p = c.sh("workspace-write", "i=0; while [ $i -lt 64 ]; do printf '%0256d' 0; i=$((i+1)); done > \"$1\"",
                  {f}, {}, {"--file-size", "4K", "--limits", "required"});
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) return failed("limit-file-size", what, "the file was not written: " + brief(p));
    if (st.st_size > 4096) return failed("limit-file-size", what, fmt::format("the file grew to {} bytes", st.st_size));
    return held("limit-file-size", what);
}

Check check_timeout(Ctx& c) {
    const char* what = "--timeout 1s: the command is ended with status 124";
    const long t0 = now_ms();
    Proc p = c.sh("read-only", "sleep 8; exit 0", {}, {}, {"--timeout", "1s", "--kill-after", "1s"});
    const long took = now_ms() - t0;
    if (p.status != 124 || took > 6000)
        return failed("limit-timeout", what, fmt::format("{} after {} ms", brief(p), took));
    return held("limit-timeout", what);
}

RunnerResult run_runner(Ctx& c) {
    RunnerResult rr;
    rr.runner = c.runner;
    // Usable at all? A runner that refuses with SANDBOX_UNAVAILABLE is not
    // usable here; anything else that is not a clean run is a failure.
    Proc p = c.sh("read-only", "exit 0");
    if (p.status != 0) {
        const json* e = record(p, "error");
        rr.reason = e && e->contains("message") && (*e)["message"].is_string() ? (*e)["message"].get<std::string>()
                                                                                 : brief(p);
        return rr;
    }
    rr.usable = true;
    rr.checks.push_back(check_report(c, rr));
    rr.checks.push_back(check_exit_status(c));
    rr.checks.push_back(check_write_inside(c));
    rr.checks.push_back(check_write_outside(c));
    rr.checks.push_back(check_read_only(c));
    rr.checks.push_back(check_dev_null(c));
    rr.checks.push_back(check_tmp(c, rr));
    rr.checks.push_back(check_symlink(c));
    rr.checks.push_back(check_links_and_renames(c));
    rr.checks.push_back(check_grandchild(c));
    rr.checks.push_back(check_inherited_fd(c));
    rr.checks.push_back(check_proc_fd(c));
    check_privileges(c, rr.checks);
    rr.checks.push_back(check_device_node(c));
    rr.checks.push_back(check_metadata(c, "read-only"));
    rr.checks.push_back(check_metadata(c, "workspace-write"));
    rr.checks.push_back(check_tiocsti(c));
    rr.checks.push_back(check_network(c));
    rr.checks.push_back(check_protected(c));
    rr.checks.push_back(check_hidden(c));
    rr.checks.push_back(check_file_size(c));
    rr.checks.push_back(check_timeout(c));
    return rr;
}

const char* state_name(Check::State s) {
    switch (s) {
        case Check::Held: return "held";
        case Check::Failed: return "FAILED";
        case Check::NotApplicable: return "n/a";
    }
    return "FAILED";
}

std::string self_exe() {
    char buf[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return {};
    return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

int attempt(const std::string& name) {
    if (name == "tiocsti") {
        char ch = ' ';
        int rc = ::ioctl(STDIN_FILENO, TIOCSTI, &ch);
        std::string line = rc == 0 ? "tiocsti=ok\n" : fmt::format("tiocsti={}\n", std::strerror(errno));
        (void)!::write(STDOUT_FILENO, line.data(), line.size());
        return 0;
    }
    if (name.rfind("connect=", 0) == 0) {
        // One TCP connection to 127.0.0.1:PORT; the listener outside counts it.
        int port = 0;
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int rc = -1;
        if (parse_fd(std::string_view(name).substr(8), port) && port > 0 && port < 65536 && fd >= 0) {
            a.sin_port = htons(static_cast<uint16_t>(port));
            rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
        }
        std::string line = rc == 0 ? "connect=ok\n" : fmt::format("connect={}\n", std::strerror(errno));
        if (fd >= 0) ::close(fd);
        (void)!::write(STDOUT_FILENO, line.data(), line.size());
        return 0;
    }
    std::string line = fmt::format("dsh-confine: unknown attempt \"{}\"\n", name);
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    return 125;
}

int run(const Request& req) {
    if (req.selftest_attempt) return attempt(*req.selftest_attempt);
    Ctx c;
    c.self = self_exe();
    if (c.self.empty()) {
        std::fputs("dsh-confine: self-test: cannot find its own executable (/proc/self/exe)\n", stderr);
        return 125;
    }
    c.binary = req.selftest_binary ? canonical_path(*req.selftest_binary, ".") : c.self;
    c.config = req.config;
    std::vector<std::string> runners;
    if (req.runner) runners.push_back(*req.runner);
    else
        // Every runner of this host that auto could take (a custom runner
        // only when configured), in auto's order.
        for (const Runner* r : registry())
            if (r->candidate(Config{})) runners.emplace_back(to_string(r->kind()));

    std::string why;
    auto base = make_scratch(why);
    if (!base) {
        std::fprintf(stderr, "dsh-confine: self-test: cannot make a scratch directory: %s\n", why.c_str());
        return 125;
    }
    c.base = *base;
    c.ws = c.base + "/ws";
    c.outside = c.base + "/outside";
    c.tmpdir = c.base + "/tmpdir";
    for (const auto& d : {c.ws, c.outside, c.tmpdir}) ::mkdir(d.c_str(), 0755);
    for (char** e = environ; e && *e; ++e)
        if (std::strncmp(*e, "TMPDIR=", 7) != 0 && std::strncmp(*e, "LC_ALL=", 7) != 0) c.env.emplace_back(*e);
    c.env.push_back("TMPDIR=" + c.tmpdir);
    c.env.push_back("LC_ALL=C");

    std::vector<RunnerResult> results;
    for (const auto& r : runners) {
        c.runner = r;
        results.push_back(run_runner(c));
    }
    remove_tree(c.base);

    // Verdict: every runner asked for by name must be usable; without
    // --runner, at least one must be, and every usable one must hold.
    bool any_usable = false, ok = true;
    for (const auto& r : results) {
        any_usable = any_usable || r.usable;
        if (r.usable ? r.failed() : req.runner.has_value()) ok = false;
    }
    ok = ok && any_usable;

    if (req.json) {
        // In the order written, `type` first, as in every record of the report.
        nlohmann::ordered_json j;
        j["type"] = "self-test";
        j["version"] = 1;
        j["ok"] = ok;
        j["binary"] = c.binary;
        j["scratch"] = c.base;  // removed before this is printed
        nlohmann::ordered_json arr = nlohmann::ordered_json::array();
        for (const auto& r : results) {
            nlohmann::ordered_json rj{{"runner", r.runner}, {"usable", r.usable}};
            if (!r.usable) rj["reason"] = r.reason;
            nlohmann::ordered_json checks = nlohmann::ordered_json::array();
            for (const auto& ch : r.checks)
                checks.push_back(nlohmann::ordered_json{{"name", ch.name}, {"result", state_name(ch.state)}, {"what", ch.what},
                                      {"detail", ch.detail}});
            rj["checks"] = checks;
            if (!r.confinement.is_null()) rj["enforcement"] = r.confinement.value("enforcement", "");
            arr.push_back(rj);
        }
        j["runners"] = arr;
        std::string s = j.dump(2) + "\n";
        std::fputs(s.c_str(), stdout);
    } else {
        std::string out = fmt::format("dsh-confine self-test of {}\n", c.binary);
        for (const auto& r : results) {
            if (!r.usable) {
                out += fmt::format("\nrunner {}: not usable here: {}\n", r.runner, r.reason);
                continue;
            }
            size_t h = 0, f = 0, n = 0;
            out += fmt::format("\nrunner {} (enforcement {}):\n", r.runner, r.confinement.value("enforcement", "?"));
            for (const auto& ch : r.checks) {
                (ch.state == Check::Held ? h : ch.state == Check::Failed ? f : n)++;
                out += fmt::format("  {:<6}  {:<26} {}{}\n", state_name(ch.state), ch.name, ch.what,
                                   ch.detail.empty() ? "" : " [" + ch.detail + "]");
            }
            out += fmt::format("  {} held, {} FAILED, {} not applicable\n", h, f, n);
        }
        out += ok ? "\nself-test passed: every check held.\n"
                  : "\nSELF-TEST FAILED: do not trust dsh-confine on this machine with the runner(s) above.\n";
        std::fputs(out.c_str(), stdout);
    }
    std::fflush(stdout);
    return ok ? 0 : 1;
}

}  // namespace dsh::selftest
