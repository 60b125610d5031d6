#include "escalation.hpp"
#include "own_state.hpp"

#include "bytes.hpp"
#include "fd.hpp"
#include "policy.hpp"
#include "report.hpp"

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#if !defined(_WIN32)
#include <sys/wait.h>
#include <termios.h>
#include "spawn.hpp"
#endif
#include <unistd.h>

extern char** environ;

namespace dsh {

std::vector<Mode> wider_modes(Mode current) {
    switch (current) {
        case Mode::ReadOnly: return {Mode::WorkspaceWrite, Mode::DangerFullAccess};
        case Mode::WorkspaceWrite: return {Mode::DangerFullAccess};
        case Mode::DangerFullAccess: return {};
    }
    return {};
}

std::vector<Network> wider_networks(Network current) {
    switch (current) {
        case Network::Off: return {Network::Loopback, Network::Host};
        case Network::Loopback: return {Network::Host};
        case Network::Host: return {};
    }
    return {};
}

Outcome parse_network_escalation(const std::string& target, Network& out) {
    auto n = parse_network(target);
    if (!n || *n == Network::Off)
        return failf(Err::EscalationInvalid, "invalid escalation: unknown network \"{}\" for --escalate-net "
                                             "(loopback or host)", target);
    out = *n;
    return Outcome::success();
}

namespace {
// What an escalation asks for, in its texts: the seed's "\"<mode>\"", or
// the network's.
std::string target_text(const EscalationRequest& r) {
    if (!r.target_network) return fmt::format("\"{}\"", to_string(r.target));
    if (!r.mode_asked) return fmt::format("network \"{}\"", to_string(*r.target_network));
    return fmt::format("\"{}\" with network \"{}\"", to_string(r.target), to_string(*r.target_network));
}
}  // namespace

// JavaScript's String.prototype.trim() set (the seed trims with it):
// WhiteSpace (TAB, VT, FF, SP, NBSP, ZWNBSP and every Zs code point) and
// LineTerminator (LF, CR, LS, PS).
static bool js_space(uint32_t c) {
    switch (c) {
        case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d: case 0x20: case 0xa0: case 0x1680:
        case 0x2028: case 0x2029: case 0x202f: case 0x205f: case 0x3000: case 0xfeff: return true;
        default: return c >= 0x2000 && c <= 0x200a;
    }
}

// Blank as the seed's trim() sees it: only such code points. Bytes that are
// not UTF-8 are not blank.
static bool trims_to_nothing(const std::string& s) {
    uint32_t c;
    for (size_t i = 0; i < s.size();)
        if (!next_code_point(s, i, c) || !js_space(c)) return false;
    return true;
}

Outcome validate_escalation_args(const std::optional<std::string>& target,
                                 const std::optional<std::string>& justification, Mode& target_mode) {
    // The report keeps the seed's texts, which harnesses match exactly (they
    // name the tool call's fields); stderr adds the command line's spelling.
    if (target && !justification)
        return with_hint(fail(Err::EscalationInvalid, "invalid escalation: sandbox_permissions requires a justification"),
                         hint_text(Hint::EscalateNeedsJustification));
    if (!target && justification)
        return with_hint(fail(Err::EscalationInvalid,
                              "invalid escalation: justification is only valid together with sandbox_permissions"),
                         hint_text(Hint::JustificationNeedsEscalate));
    if (!target) return Outcome::success();
    if (trims_to_nothing(*justification))
        return with_hint(fail(Err::EscalationInvalid, "invalid justification: expected a non-empty sentence"),
                         hint_text(Hint::BlankJustification));
    auto m = parse_mode(*target);
    if (!m)
        return failf(Err::EscalationInvalid,
                     "invalid escalation: unknown mode \"{}\" (workspace-write or danger-full-access)", *target);
    target_mode = *m;
    return Outcome::success();
}

std::string_view to_string(Approval a) noexcept {
    switch (a) {
        case Approval::AllowedOnce: return "allowed-once";
        case Approval::Rejected: return "rejected";
        case Approval::Cancelled: return "cancelled";
        case Approval::Unavailable: return "unavailable";
        case Approval::Failed: return "failed";
    }
    return "unavailable";
}

std::string escalation_reason(const EscalationRequest& r) {
    if (!r.target_network) return fmt::format("escalate sandbox to {}: {}", to_string(r.target), r.justification);
    if (!r.mode_asked)
        return fmt::format("escalate sandbox network to {}: {}", to_string(*r.target_network), r.justification);
    return fmt::format("escalate sandbox to {} with network {}: {}", to_string(r.target),
                       to_string(*r.target_network), r.justification);
}

nlohmann::ordered_json approval_request_json(const EscalationRequest& r) {
    nlohmann::ordered_json j;
    j["type"] = "escalation-request";
    j["version"] = 1;
    j["mode"] = to_string(r.target);
    j["currentMode"] = to_string(r.current);
    j["network"] = to_string(r.target_network.value_or(r.current_network));
    j["currentNetwork"] = to_string(r.current_network);
    j["justification"] = r.justification;
    j["reason"] = escalation_reason(r);
    j["subject"] = r.subject;
    j["argv"] = r.argv;
    j["root"] = r.root;
    return j;
}

Outcome approval_error(Approval a, const EscalationRequest& r, const std::string& failure) {
    const std::string mode = target_text(r);
    switch (a) {
        case Approval::AllowedOnce: return Outcome::success();
        case Approval::Rejected:
            return failf(Err::EscalationRejected, "the user rejected escalating this {} to {}", r.subject, mode);
        case Approval::Cancelled:
            return failf(Err::EscalationCancelled, "approval for escalating to {} was cancelled", mode);
        case Approval::Unavailable:
            return with_fix(failf(Err::EscalationUnavailable,
                                  "sandbox escalation to {} requires approval, but no approval channel is "
                                  "available", mode),
                            failure);
        case Approval::Failed:
            // Not "no channel": one was there, ran and gave no answer. The
            // same code (nothing was approved, nobody said no), its own text.
            return failf(Err::EscalationUnavailable,
                         "sandbox escalation to {} requires approval, but the approver failed: {}", mode,
                         failure.empty() ? std::string("it gave no answer") : failure);
    }
    return fail(Err::Internal, "unknown approval outcome");
}

Outcome approve_escalation(const EscalationRequest& r, Approver* approver, Mode& granted) {
    bool wider = false;
    for (Mode m : wider_modes(r.current)) wider = wider || m == r.target;
    if (r.mode_asked && !wider)
        return with_fix(failf(Err::EscalationNotWider,
                              "sandbox escalation to \"{}\" is not strictly wider than this call's current \"{}\" mode",
                              to_string(r.target), to_string(r.current)),
                        hint_text(Hint::NotWider, to_string(r.current)));
    if (r.target_network) {
        bool net_wider = false;
        for (Network n : wider_networks(r.current_network)) net_wider = net_wider || n == *r.target_network;
        if (!net_wider)
            return with_fix(failf(Err::EscalationNotWider,
                                   "sandbox escalation to network \"{}\" is not strictly wider than this call's "
                                   "current \"{}\" network",
                                   to_string(*r.target_network), to_string(r.current_network)),
                            hint_text(Hint::NetNotWider, to_string(r.current_network)));
    }
    if (approver == nullptr)
        return with_hint(failf(Err::EscalationNoApprover,
                               "sandbox escalation to {} requires approval, but no approval service is composed",
                               target_text(r)),
                         hint_text(Hint::NoApprover, target_text(r)));
    const Approval a = approver->ask(r);
    if (auto o = approval_error(a, r, approver->failure()); !o) return o;
    granted = r.target;
    return Outcome::success();
}

// ---- the approver's files ---------------------------------------------------

Outcome parse_approver(const std::string& command, const std::string& cwd, const char* path_env,
                       ApproverCommand& out) {
    out = ApproverCommand{};
    auto refuse = [&](std::string_view why) {
        return fail(Err::Usage, approver_syntax_text(nlohmann::json(command).dump(-1, ' ', true,
                                                                                   nlohmann::json::error_handler_t::replace),
                                                      why));
    };
    std::vector<std::string> words;
    std::string w;
    for (char ch : command) {
        const auto u = static_cast<unsigned char>(ch);
        if (ch == ' ' || ch == '\t') {
            if (!w.empty()) words.push_back(std::move(w));
            w.clear();
            continue;
        }
        if (u < 0x20 || u == 0x7f) return refuse("a control character");
        if (std::string_view("'\"\\$`~*?[]{}()<>|&;#!").find(ch) != std::string_view::npos)
            return refuse(fmt::format("'{}'", ch));
        w += ch;
    }
    if (!w.empty()) words.push_back(std::move(w));
    if (words.empty()) return refuse("no program");
    if (words[0].find('=') != std::string::npos) return refuse("an assignment");
    auto absolute = [&](const std::string& p) { return lexically_normal(p[0] == '/' ? p : cwd + "/" + p); };
    auto regular = [](const std::string& p) {
        struct stat st {};
        return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
    };
    std::string program = words[0];
    if (program.find('/') != std::string::npos) {
        program = absolute(program);
        out.files.push_back(program);
    } else {
        const std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
        for (size_t i = 0; i <= path.size();) {
            size_t j = path.find(':', i);
            if (j == std::string::npos) j = path.size();
            const std::string dir = path.substr(i, j - i);
            const std::string cand = absolute((dir.empty() ? std::string(".") : dir) + "/" + words[0]);
            out.files.push_back(cand);
            if (regular(cand) && ::access(cand.c_str(), X_OK) == 0) {
                program = cand;
                break;
            }
            i = j + 1;
        }
    }
    out.argv.push_back(program);
    for (size_t i = 1; i < words.size(); ++i) {
        out.argv.push_back(words[i]);
        if (words[i][0] == '-') continue;
        if (const std::string f = absolute(words[i]); regular(f)) out.files.push_back(f);
    }
    return Outcome::success();
}

std::vector<std::string> approver_files(const std::string& command, const std::string& cwd, const char* path_env) {
    ApproverCommand c;
    if (command.empty() || command == "tty" || !parse_approver(command, cwd, path_env, c)) return {};
    return c.files;
}

Outcome check_approver_files(const std::vector<std::string>& files) {
    for (const auto& f : files) {
        struct stat st {};
        // Nothing there to run (the call is then unavailable), or nothing that
        // runs (a directory, /dev/null).
        if (::stat(f.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (auto o = check_trusted_file(f, Err::StateUnsafe, "approver"); !o) return o;
    }
    return Outcome::success();
}

// ---- tty ------------------------------------------------------------------

std::optional<Approval> approval_from_answer(std::string_view line) {
    const auto b = line.find_first_not_of(" \t\r");
    const auto e = line.find_last_not_of(" \t\r");
    std::string a(b == std::string_view::npos ? std::string_view() : line.substr(b, e - b + 1));
    for (auto& c : a) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (a == "a" || a == "allow" || a == "allow once" || a == "y" || a == "yes") return Approval::AllowedOnce;
    if (a == "r" || a == "reject" || a == "n" || a == "no") return Approval::Rejected;
    if (a == "c" || a == "cancel") return Approval::Cancelled;
    return std::nullopt;
}

Approval tty_conversation(const std::function<bool(std::string_view)>& say, const std::function<int()>& read_byte) {
    for (int tries = 0; tries < 3; ++tries) {
        if (!say("Allow once, reject, or cancel? [a/r/c] ")) return Approval::Unavailable;
        std::string line;
        while (true) {
            const int ch = read_byte();
            if (ch < 0) return Approval::Cancelled;  // EOF (Ctrl-D) before the line ends
            if (ch == '\n') break;
            if (line.size() < kMaxAnswerBytes) line += static_cast<char>(ch);
        }
        if (auto a = approval_from_answer(line)) return *a;
        // Anything else asks again; three unclear answers cancel.
    }
    return Approval::Cancelled;
}

// Text shown on a terminal must not drive it: control characters (an escape
// sequence in a justification could redraw the prompt), C1 controls (0x9b is
// CSI on some terminals) and bidi controls (they reorder what is shown, so a
// justification could display as something else) are shown escaped, and so
// are bytes that are not UTF-8.
std::string escape_for_terminal(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
        const size_t at = i;
        uint32_t cp = 0;
        if (!next_code_point(s, i, cp)) {
            out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
            ++i;
            continue;
        }
        const bool bidi = cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
                          (cp >= 0x2066 && cp <= 0x2069);
        if (cp < 0x20 || cp == 0x7f) out += fmt::format("\\x{:02x}", cp);
        else if ((cp >= 0x80 && cp <= 0x9f) || bidi) out += fmt::format("\\u{{{:04x}}}", cp);
        else out.append(s.substr(at, i - at));
    }
    return out;
}

#if !defined(_WIN32)
Approval TtyApprover::ask(const EscalationRequest& r) {
    // The controlling terminal, not stdin: the command's input may be a pipe,
    // and the answer must come from the person at the terminal.
    failure_.clear();
    int fd = ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        failure_ = fmt::format("--approver tty needs a terminal and /dev/tty cannot be opened ({}); run from a "
                               "terminal or give --approver COMMAND", std::strerror(errno));
        return Approval::Unavailable;
    }
    std::string argv_text = nlohmann::json(r.argv).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    std::string prompt = fmt::format(
        "dsh-confine: {}\n  {}: {}\n  root: {}\n  current mode: {}\n",
        escape_for_terminal(escalation_reason(r)), r.subject, escape_for_terminal(argv_text), escape_for_terminal(r.root), to_string(r.current));
    if (write_whole(fd, prompt) != 0) {
        ::close(fd);
        return Approval::Unavailable;
    }

    // One byte per read: nothing typed after the answer's '\n' is consumed;
    // it stays on the terminal for the command.
    auto read_byte = [fd]() -> int {
        unsigned char ch;
        while (true) {
            ssize_t n = ::read(fd, &ch, 1);
            if (n < 0 && errno == EINTR) continue;
            return n == 1 ? ch : -1;
        }
    };
    // Only what is typed after the question is shown counts: input already
    // waiting just before it first appears (typed ahead, or queued by
    // anything else on the terminal) is discarded, so no answer precedes the
    // question. Discarded before the question is written, not after: an
    // answer typed as soon as it shows must not be thrown away with it (a
    // flush after the write raced with a quick "a"). Lines typed after it are
    // the person's, read one by one when it asks again.
    bool first = true;
    auto say = [fd, &first](std::string_view s) {
        if (first) (void)::tcflush(fd, TCIFLUSH);
        first = false;
        return write_whole(fd, s) == 0;
    };
    const Approval result = tty_conversation(say, read_byte);
    ::close(fd);
    return result;
}

// ---- command ----------------------------------------------------------------

Approval approval_from_status(int status) noexcept {
    if (!WIFEXITED(status)) return Approval::Failed;
    switch (WEXITSTATUS(status)) {
        case 0: return Approval::AllowedOnce;
        case 1: return Approval::Rejected;
        case 2: return Approval::Cancelled;
        default: return Approval::Failed;
    }
}

std::string approver_status_text(int status) {
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        const char* name = sig == SIGHUP ? "SIGHUP" : sig == SIGINT ? "SIGINT" : sig == SIGQUIT ? "SIGQUIT"
                         : sig == SIGABRT ? "SIGABRT" : sig == SIGKILL ? "SIGKILL" : sig == SIGSEGV ? "SIGSEGV"
                         : sig == SIGPIPE ? "SIGPIPE" : sig == SIGALRM ? "SIGALRM" : sig == SIGTERM ? "SIGTERM"
                         : nullptr;
        return name ? fmt::format("it was killed by signal {} ({})", sig, name)
                    : fmt::format("it was killed by signal {}", sig);
    }
    if (!WIFEXITED(status)) return fmt::format("it ended with wait status {}", status);
    const int code = WEXITSTATUS(status);
    // /bin/sh's own two: the approver named no program it could run.
    if (code == 127) return "it exited with status 127 (its program was not found)";
    if (code == 126) return "it exited with status 126 (its program could not be executed)";
    return fmt::format("it exited with status {} (0 allows once, 1 rejects, 2 cancels)", code);
}

Approval CommandApprover::ask(const EscalationRequest& r) {
    failure_.clear();
    if (command_.argv.empty()) {
        failure_ = "the approver command names no program";
        return Approval::Unavailable;
    }
    const std::string& program = command_.argv[0];
    // Opened once, checked, and run by that descriptor: the file checked is
    // the file run, whatever is renamed in between.
    int prog = -1;
    if (auto o = open_trusted_program(program, Err::StateUnsafe, "approver", prog); !o) {
        failure_ = o.message;
        return Approval::Failed;
    }
    Fd prog_fd(prog);
    // Both ends close on exec: the approver gets the read end as its stdin
    // (dup2 clears the flag there) and must not hold the write end, or it
    // never sees EOF. pipe(2) and fcntl(2), not pipe2: macOS has no pipe2,
    // and no other thread can exec in between (dsh-confine starts none).
    int in[2];
    if (spawn::cloexec_pipe(in) != 0) {
        failure_ = fmt::format("the approver command could not be started: pipe: {}", std::strerror(errno));
        return Approval::Unavailable;
    }
    // stdin: the request. stdout: our stderr, so an approver's chatter never
    // lands in the output a caller reads from the command. The program is
    // fd 3 in the child, not close-on-exec, so that an interpreter can open
    // a script through /proc/self/fd/3 too.
    std::vector<char*> argv;
    for (const auto& a : command_.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
#if defined(__linux__)
    const char* path = "/proc/self/fd/3";
#else
    const char* path = program.c_str();
#endif
    const int pass[] = {prog_fd.get()};
    spawn::Child child;
    child.path = path;
    child.argv = argv.data();
    child.envp = environ;
    child.stdin_fd = in[0];
    child.stdout_fd = STDERR_FILENO;
    child.pass_fds = pass;
    child.n_pass = 1;
    const pid_t pid = spawn::start(child);
    ::close(in[0]);
    if (pid < 0) {
        const int e = errno;
        ::close(in[1]);
        failure_ = fmt::format("the approver command could not be started: {}: {}", program, std::strerror(e));
        return Approval::Unavailable;
    }
    // An approver that exits without reading closes the pipe: EPIPE, not a
    // SIGPIPE death of dsh-confine (write_whole holds SIGPIPE off).
    std::string body = json_line(approval_request_json(r)) + "\n";
    (void)write_whole(in[1], body);
    ::close(in[1]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            failure_ = fmt::format("the approver command could not be waited for: {}", std::strerror(errno));
            return Approval::Unavailable;
        }
    const Approval a = approval_from_status(status);
    if (a == Approval::Failed) failure_ = approver_status_text(status);
    return a;
}

#else
// Windows: no /dev/tty and no posix_spawn; an approver there is unavailable
// (fails closed: nothing runs). Not executed: see docs/PLATFORMS.md.
Approval TtyApprover::ask(const EscalationRequest&) { return Approval::Unavailable; }
Approval CommandApprover::ask(const EscalationRequest&) { return Approval::Unavailable; }
#endif

}  // namespace dsh
