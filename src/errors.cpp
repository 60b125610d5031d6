#include "errors.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0  // Windows: handles are not inherited by default
#endif
#ifndef O_NOCTTY
#define O_NOCTTY 0
#endif

namespace dsh {

ErrInfo info(Err e) noexcept {
    switch (e) {
        case Err::Usage: return {"USAGE", 125};
        case Err::InvalidRoot: return {"INVALID_WORKSPACE_ROOT", 125};
        case Err::InvalidPath: return {"INVALID_WRITABLE_PATH", 125};
        case Err::ReportFd: return {"REPORT_FD_INVALID", 125};
        case Err::ReportWrite: return {"REPORT_WRITE_FAILED", 125};
        case Err::SandboxUnavailable: return {"SANDBOX_UNAVAILABLE", 125};
        case Err::CommandNotFound: return {"COMMAND_NOT_FOUND", 127};
        case Err::CommandNotExecutable: return {"COMMAND_NOT_EXECUTABLE", 126};
        case Err::ConfigInvalid: return {"CONFIG_INVALID", 125};
        case Err::SessionInvalid: return {"SESSION_INVALID", 125};
        case Err::EscalationInvalid: return {"ESCALATION_INVALID", 125};
        case Err::EscalationNotWider: return {"ESCALATION_NOT_WIDER", 125};
        case Err::EscalationNoApprover: return {"ESCALATION_NO_APPROVER", 125};
        case Err::EscalationRejected: return {"ESCALATION_REJECTED", 125};
        case Err::EscalationCancelled: return {"ESCALATION_CANCELLED", 125};
        case Err::EscalationUnavailable: return {"ESCALATION_UNAVAILABLE", 125};
        case Err::Internal: return {"INTERNAL_ERROR", 125};
    }
    return {"INTERNAL_ERROR", 125};  // unreachable: every enumerator is listed above
}

std::string one_line(std::string_view message) {
    std::string out;
    out.reserve(message.size());
    for (unsigned char ch : message) {
        if (ch == '\n') out += "\\n";
        else if (ch == '\t') out += "\\t";
        else if (ch == '\r') out += "\\r";
        else if (ch < 0x20 || ch == 0x7f) out += fmt::format("\\x{:02x}", ch);
        else out += static_cast<char>(ch);
    }
    return out;
}

std::string sandbox_unavailable_text(std::string_view mode) {
    return fmt::format(
        "sandbox mode \"{}\" is requested but no sandbox backend is usable on this host; "
        "refusing to run the command unconfined. Install bubblewrap or run a Landlock-enforcing "
        "kernel (Linux), ensure sandbox-exec is usable (macOS), or ensure the ACL restricted-token "
        "runner can start (Windows) \u2014 otherwise switch the consumer to danger-full-access.",
        mode);
}

std::string usage_text(UsageText t, std::string_view a, std::string_view b) {
    switch (t) {
        case UsageText::NoCommand: return "no command given: dsh-confine [OPTIONS] -- COMMAND [ARG...]";
        case UsageText::EmptyCommand: return "the command name is empty";
        case UsageText::UnknownOption: return fmt::format("unknown option \"{}\"; Try '{} --help'", a, b);
        case UsageText::UnknownCommandOption:
            return fmt::format(
                "unknown option \"{}\"; if it is the command's, put the command after --: "
                "dsh-confine [OPTIONS] -- COMMAND [ARG...]",
                a);
        case UsageText::OptionNotHere: return fmt::format("option {} does not apply here; Try '{} --help'", a, b);
        case UsageText::NeedsValue: return fmt::format("option {} needs a value: {} {}", a, a, b);
        case UsageText::TakesNoValue: return fmt::format("option {} takes no value: give it alone", a);
        case UsageText::GivenTwice: return fmt::format("option {} is given twice: give it once", a);
        case UsageText::NotAnFd:
            return fmt::format("option {} takes a file descriptor number (0, 1, 2, ...), not \"{}\"", a, b);
        case UsageText::NotMilliseconds:
            return fmt::format("option {} takes a positive whole number of milliseconds, not \"{}\"", a, b);
        case UsageText::SetenvForm:
            return fmt::format("option --setenv takes one word NAME=VALUE, not \"{}\": --setenv {}=VALUE", a, a);
        case UsageText::TakesNoCommand:
            return fmt::format("{} takes no command after --; Try 'dsh-confine {} --help'", a, a);
        case UsageText::TakesNoWord:
            return fmt::format(
                "{} takes no argument \"{}\"; to run a command named {}, put it after --: "
                "dsh-confine [OPTIONS] -- {} [ARG...]",
                a, b, a, a);
        case UsageText::SessionNeedsSetMode:
            return a.empty() ? std::string("session needs a subcommand: dsh-confine session set-mode FILE MODE")
                             : fmt::format("unknown session subcommand \"{}\": dsh-confine session set-mode FILE MODE",
                                           a);
        case UsageText::SetModeArgs: return "session set-mode takes a FILE and a MODE: dsh-confine session set-mode FILE MODE";
        case UsageText::CheckNeedsWrite: return "check needs the path to ask about: dsh-confine check --write PATH";
        case UsageText::Unreadable: return "the options could not be read; Try 'dsh-confine --help'";
        case UsageText::UnknownMode:
            return fmt::format("unknown mode \"{}\" (read-only, workspace-write or danger-full-access)", a);
        case UsageText::UnknownRunner:
            return fmt::format("unknown runner \"{}\" (auto, bwrap, landlock, seatbelt, windows-acl or custom)", a);
    }
    return "bad command line; Try 'dsh-confine --help'";  // unreachable: every enumerator is listed above
}

int write_whole(int fd, std::string_view data) noexcept {
#ifndef _WIN32  // Windows has no SIGPIPE: a gone reader is a failed write
    struct sigaction ign {}, old {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old);
#endif
    int err = 0;
    while (!data.empty()) {
#ifdef _WIN32
        const auto n = ::write(fd, data.data(), static_cast<unsigned>(data.size()));
#else
        const ssize_t n = ::write(fd, data.data(), data.size());
#endif
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            err = n < 0 ? errno : EIO;
            break;
        }
        data.remove_prefix(static_cast<size_t>(n));
    }
#ifndef _WIN32
    ::sigaction(SIGPIPE, &old, nullptr);
#endif
    return err;
}

Outcome open_regular_file(const std::string& path, int flags, Err err, std::string_view what, int& fd) {
    fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0) return failf(err, "{} {}: cannot open: {}", what, path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fd = -1;
        return failf(err, "{} {}: not a regular file", what, path);
    }
    return Outcome::success();
}

void print_error(std::string_view message) {
    (void)write_whole(STDERR_FILENO, "dsh-confine: " + one_line(message) + "\n");
}

}  // namespace dsh
