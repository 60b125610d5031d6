// The one way dsh-confine starts a process (POSIX). Everything the child does
// between fork and exec is decided before the fork and held in a Child: the
// child makes system calls on that data only (no allocation, no formatting,
// nothing written into the parent's memory), so the same path is safe in
// every build, the sanitized one included, and a failure in the child comes
// back as a Fault (a fixed-size record) on a pipe, never as text.
#pragma once

#include <csignal>
#include <string>
#include <sys/types.h>
#include <vector>

#include "errors.hpp"

namespace dsh::spawn {

// The last step of a child: enters confinement and execs; returns only on
// failure, with the fault set. Supervise's is launch.hpp's enter().
using EnterFn = bool (*)(const void* data, Fault& f) noexcept;

// Turns strings into the NULL-terminated array execve takes; the strings
// must outlive it.
std::vector<char*> c_array(const std::vector<std::string>& v);

// What the relay and the pty's agent (Child::agent_fd) say to each other:
// `op` 'p' (the agent's first word: `pg` its pid), 'b' (take the pty's
// foreground: the answer's `pg` is the group that had it), 'f' (give it to
// group `pg`: the answer's `pg` is that group, or -errno).
struct AgentMsg {
    int op = 0;
    int pg = 0;
};

struct Child {
    const char* path = nullptr;  // execve(path, argv, envp) unless `enter` is set
    char* const* argv = nullptr;
    char* const* envp = nullptr;
    int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;  // dup2'd onto 0, 1, 2; -1: inherited
    // Handed on as fds 3, 4, ... (inheritable); each must be above the slots
    // before it, or already in its own.
    const int* pass_fds = nullptr;
    int n_pass = 0;
    bool close_others = false; // close every fd above the passed ones before exec
    bool new_group = false;    // setpgid(0, 0)
    // A new session whose controlling terminal is this one, on 0, 1 and 2.
    const char* terminal = nullptr;
    // A new session whose controlling terminal is this open fd (a pty's
    // slave), put on the std fds whose bit is set in terminal_on (bit i: fd i).
    int terminal_fd = -1;
    unsigned terminal_on = 0;
    // With terminal_fd: the child stays as the pty session's leader (a
    // monitor, as sudo's use_pty has) and the command runs in a process group
    // of its own in front of that terminal, so that the job control of the
    // pty's line discipline (Ctrl-Z) reaches it: a group led by the session
    // leader itself has no parent in its session and is orphaned, which the
    // kernel never stops on SIGTSTP. The monitor relays every signal it gets
    // to the command and exits as the command did.
    bool monitor = false;
    // With terminal_fd: the pty's agent (terminal.hpp, Relay) is made in the
    // pty's session, our child (CLONE_PARENT), in a process group of its own,
    // on this end of a socket of the relay's. `start_behind`: it takes the
    // pty's foreground before anything of the command runs (dsh-confine was
    // started in the background of the user's terminal), so the command
    // starts in the background of its pty as the bare command would of the
    // user's.
    int agent_fd = -1;
    bool start_behind = false;
    // Linux, no terminal: the child starts new PID and mount namespaces (a
    // user namespace too, `ns_user`, with these maps) and is their init
    // (issue 38): it mounts a /proc of its own where the mounts can be made
    // private, forks the command, reaps every process that comes to it,
    // relays to the command the signals sent from outside its namespace, and
    // writes the command's wait status (an int) to `status_fd` before it
    // exits; the kernel then ends every other process of the namespace, at
    // once, however fast they fork. start() fails (errno) where the kernel
    // refuses the namespaces. With `monitor`, the monitor stays the pty
    // session's leader out here (beside the pty's agent) and the init is its
    // child, in that session; the namespaces are made past the point of a
    // fallback, so the caller asks pid_ns_allowed first.
    bool pid_ns = false;
    bool ns_user = false;
    const char* uid_map = nullptr;
    const char* gid_map = nullptr;
    int status_fd = -1;
    int pdeathsig = 0;         // PR_SET_PDEATHSIG; the child exits if the parent is already gone
    const char* cwd = nullptr;
    // Dispositions to restore (signals the parent handles go back to what
    // the caller had); mask: the signal mask the child execs with.
    const int* reset_signals = nullptr;
    const struct sigaction* reset_actions = nullptr;
    int n_reset = 0;
    const sigset_t* mask = nullptr;
    EnterFn enter = nullptr;
    const void* enter_data = nullptr;
    int fault_fd = -1;  // where the child writes its Fault before _exit
    // What failed to exec is a runner (bwrap, a custom runner): its exit
    // status is a runner failure's 125, not the command's 126/127.
    bool exec_is_runner = false;
};

// Starts the child; its pid, or -1 with errno set. Signals are blocked in
// the parent around the fork, so that none is handled by a child that has
// not reset its dispositions yet.
pid_t start(const Child& c);

// The child's part of `c` run in this very process, no fork: every signal is
// blocked first, as start() has them in its child (the caller sets the mask
// the command execs with: launch.hpp's Entry::exec_mask). For bwrap's stage
// (issue 42), which leads the command's pty inside the sandbox: with
// terminal_fd and monitor, this process becomes the pty session's leader and
// monitor, and its child the command. Never returns.
[[noreturn]] void become(const Child& c) noexcept;

// A child run with a deadline: stdin and (unless captured) stdout on
// /dev/null, stderr captured, in its own process group, killed with its group
// at the deadline and after it exits.
struct Result {
    bool started = false;
    bool timed_out = false;
    int status = 0;  // waitpid status
    std::string out, err;
    std::string error;  // why it could not be started
};
Result run_bounded(const std::string& path, const std::vector<std::string>& argv,
                   const std::vector<std::string>& env, int timeout_ms, int pass_fd, bool capture_stdout);

// pipe2(O_CLOEXEC), or its equivalent where there is no pipe2.
int cloexec_pipe(int p[2]) noexcept;

// Whether the kernel lets this process make the PID and mount namespaces
// (and a user namespace: `user`) of Child::pid_ns: one short-lived child.
bool pid_ns_allowed(bool user) noexcept;

// A pidfd for `pid` (Linux 5.3), or -1 where there is none.
int pidfd_open(pid_t pid) noexcept;

// Milliseconds on the monotonic clock (the program's one clock).
double now_ms() noexcept;

}  // namespace dsh::spawn
