// The pty relay: when one of fds 0-2 is a terminal, the command gets a fresh
// pseudo-terminal instead (a new session, the pty's slave as its controlling
// terminal) and dsh-confine, its parent, relays between the two: typed input
// to the pty, the pty's output to the user's terminal, the window size. The
// user's terminal is in raw mode meanwhile (the pty's own line discipline
// does the editing and sends Ctrl-C, Ctrl-Z to the command's foreground job)
// and is restored as it was found when the command ends; then the pty's
// master is closed, so whatever the command left behind gets a hangup and EIO
// and can neither read the user's next typed line nor reconfigure the user's
// terminal. sudo's use_pty is the model (its design, not its code).
//
// Outer job control (issue 42): the pty's foreground follows the user's
// terminal's. While dsh-confine's job is in the background there, the pty's
// agent (spawn::Child::agent_fd, a process of the pty's session) holds the
// pty's foreground, so the command is in the background of its pty as the
// bare command would be of the user's terminal: a read stops it (SIGTTIN),
// a write with `tostop` too (SIGTTOU, the user's terminal's setting copied),
// and dsh-confine stops its own job with the same signal (`jobs`: Stopped
// (tty input)). Back in front (`fg`, with a SIGCONT or without: looked for
// at each look), the command's group is given the pty's foreground again,
// the user's terminal goes raw and the job is continued. dsh-confine never
// reads, nor sets modes on, the user's terminal while behind.
#pragma once

#include <string>
#include <sys/types.h>
#include <termios.h>

#include "errors.hpp"

namespace dsh::terminal {

// Is one of fds 0, 1, 2 a terminal (three ioctls, nothing else)?
bool any_std_terminal() noexcept;
// Is this process group in the background of the terminal on fds 0-2 (the
// first that is its controlling terminal)? false: in front, or no terminal.
bool std_terminal_behind() noexcept;
// Whether a terminal on fds 0-2 gets a pty of its own (not --no-pty): set once
// by the launcher before a runner plans (bwrap's stage starts the command
// behind only then: with the caller's own terminal, its group stays the job's).
void set_relayed(bool on) noexcept;
bool relayed() noexcept;

class Relay {
public:
    Relay() = default;
    Relay(const Relay&) = delete;
    Relay& operator=(const Relay&) = delete;
    ~Relay();

    // Opens the pty when a std fd is a terminal; active() says whether one
    // was opened. The slave gets the user's modes and window size.
    Outcome open();
    bool active() const noexcept { return master_ >= 0; }
    int slave() const noexcept { return slave_; }
    unsigned slave_on() const noexcept { return on_; }  // bit i: fd i gets the slave
    int master() const noexcept { return master_; }
    int user() const noexcept { return user_; }
    const std::string& slave_path() const noexcept { return slave_path_; }  // the user's terminal (window size, modes)

    // Just before the child is started: the user's terminal in raw mode if
    // dsh-confine is in its foreground, so that from then on a key typed
    // (Ctrl-Z, Ctrl-C) is the pty's to act on, never a signal to dsh-confine
    // while the command is already running.
    void go_raw();
    // In the parent once the child (`leader`, the pty's session leader)
    // exists: closes the slave here.
    void spawned(pid_t leader);
    // The pty's agent's end of its socket, for spawn::Child::agent_fd (-1:
    // none), and whether the command starts behind (Child::start_behind).
    int agent_end() const noexcept { return agent_child_; }
    bool start_behind() noexcept;
    // The pty follows the user's terminal: behind it, the agent takes the
    // pty's foreground; in front again, the job that had it (else the
    // command's group, `command`) gets it back, is continued if stopped, and
    // the user's terminal goes raw. At each look and after SIGCONT.
    void follow_front(pid_t command);
    // The agent ended (before the run's processes are counted and killed).
    void end_agent();
    pid_t agent_pid() const noexcept { return agent_pid_; }

    // A runner's stage makes the command's pty inside its sandbox
    // (Watch::own_pty, bwrap: the sandbox's own devpts names it /dev/pts/N
    // there) and hands its master out over `channel`, which the relay owns
    // from now on: no agent of ours is made (agent_end() is -1), the pty's
    // agent is the stage's, in the new pty's session. Until the master
    // comes, the pty opened here is relayed (bwrap's own messages); typed
    // input waits (the command is never in front of it).
    void inside(int channel);
    // For poll: the channel while the master is awaited (-1: not).
    int channel() const noexcept { return channel_; }
    // The channel is readable: the master, then the agent's hello. From
    // then on the relay is the new pty's (input, output, window size, stops,
    // the agent); the first pty's output is still relayed until it hangs up.
    // false: no master came (the stage runs the command on the first pty).
    bool adopt();
    // The new pty's session leader (the stage, the command's monitor), 0:
    // none adopted.
    pid_t inside_leader() const noexcept { return adopted_ ? leader_ : 0; }
    // The first pty after adopt(), for poll (-1: none), and its output.
    int first_master() const noexcept { return first_master_; }
    void first_master_ready();

    // Job control through the pty. A Ctrl-Z typed at the command stops the
    // pty's foreground job, not dsh-confine, which the user's shell waits
    // on: when that job is seen stopped, dsh-confine stops its own process
    // group as the terminal would have stopped the bare command's, with the
    // user's terminal restored, and continues the job when it is continued
    // itself (fg or bg). A stop is looked for every 25 ms while typed input
    // was relayed in the last half second (Ctrl-Z, or a program that stops
    // itself on a key, as vi does), and every 200 ms otherwise (a command
    // that stops itself, `kill -STOP` from elsewhere): `watch_ms` bounds the
    // next poll (-1: no pty).
    int watch_ms() const noexcept;
    // In front: whether the pty's foreground job is the command's own
    // process group (`command`: its pid, which leads it) and is stopped. A
    // job of a shell run as the command is that shell's to handle (it takes
    // the terminal back), never followed.
    // Behind: the job that was in front when the pty went behind (else the
    // command's), stopped by reading (or writing, with tostop). Returns the
    // stopped group, 0: none.
    pid_t stopped_job(pid_t command) const noexcept;
    // Stops as the job did (SIGTSTP in front; SIGTTIN or SIGTTOU behind), and
    // on SIGCONT follows the front (follow_front) and continues the job. A
    // watchdog outside our process group continues us at the deadline
    // (`deadline`: spawn::now_ms() when the timeout or its kill is due, 0:
    // none) and when the command's process (`pidfd`, -1: none) ends, so that
    // a stop never holds the deadline nor the end-of-run kill: the caller's
    // shell sees the job stopped, and then continued and ended.
    void follow_stop(pid_t job, pid_t command, double deadline, int pidfd);

    // Typed input waits until the command is in front of the pty. Before,
    // the pty's foreground group is its session leader's (bwrap, the
    // monitor): an orphaned group, on which the kernel discards a Ctrl-Z, and
    // a Ctrl-C there would end bwrap instead of the command. The bare command
    // would have had both. Input that came meanwhile is left in the user's
    // terminal and looked at again every 2 ms (`watch_ms`).
    // Under bwrap the command is found after it took the pty (its stage's
    // ready line): keys wait for that too, or a Ctrl-Z could stop the stage
    // before dsh-confine knows whose stop to follow. `command_known` says the
    // looking is over (found or not); without a runner's watch, at the spawn.
    void command_known() noexcept { known_ = true; }
    // After each poll: lets held input through once the command is in front,
    // and says whether a stop is to be looked for now.
    bool tick();
    // For poll: the fd typed input is read from (-1: not now) and the events
    // wanted on the master.
    int input_fd() const noexcept;
    short master_events() const noexcept;
    void input_readable();
    void master_ready(short revents);
    // The command's output waits here for the user's terminal, which is
    // written without blocking (a private non-blocking open of it): a
    // terminal that takes nothing (XOFF, not read) pauses the relay of the
    // pty's output, and so the command, never the loop that keeps the
    // deadline. `output_fd` is -1 while nothing waits.
    int output_fd() const noexcept { return to_user_.empty() ? -1 : out_nb_; }
    void output_ready();

    // The command is gone: relays what it wrote (while the terminal takes
    // it), waits for the answers to terminal queries it wrote last (bounded),
    // restores the user's terminal as it was found and, in front, discards
    // its unread input (those answers: never typed input for the caller's
    // shell), closes the master (the pty hangs up).
    void finish();

private:
    bool foreground() const noexcept;
    bool ask_agent(int op, pid_t pg, pid_t& answer);
    void go_behind();
    bool come_front(pid_t command);
    int stop_signal(pid_t job) const;
    bool command_in_front();
    void restore();
    void flush_to_master();
    void flush_to_user();
    void relay_out(const char* p, size_t n);
    void scan(const char* p, size_t n);
    void settle_answers();
    void shared_nonblock(bool on);

    int user_ = -1;    // a std fd on the user's terminal
    int in_ = -1;      // typed input: fd 0, or the controlling terminal opened here
    bool own_in_ = false;
    int out_ = -1;     // where the pty's output goes
    int master_ = -1, slave_ = -1;
    unsigned on_ = 0;
    bool saved_ = false, raw_ = false, input_done_ = false, master_done_ = false;
    pid_t leader_ = 0;       // the pty's session leader: its group in front is not the command
    bool in_front_ = false;  // the command (or a group of its) has been in front of the pty
    bool held_ = false;      // typed input waits for that
    bool known_ = false;     // and for the command to be known (command_known)
    struct termios orig_ {};
    int agent_ = -1, agent_child_ = -1;  // the agent's socket: ours, its end until the spawn
    pid_t agent_pid_ = 0;
    bool own_agent_ = true;  // our child (else the stage's, in its sandbox: not ours to kill)
    int agent_level_ = 0;    // its pid namespace's depth below ours (the groups it is told are its)
    int channel_ = -1;       // inside(): the master comes on it
    bool adopted_ = false;
    int first_master_ = -1;  // the pty opened here, once the stage's is adopted
    bool behind_ = false;  // the agent holds the pty's foreground
    pid_t job_ = 0;        // ...and this group had it
    int ldisc_ = -1;
    double watch_until_ = 0;  // spawn::now_ms() until which a stop is looked for at once
    double next_look_ = 0;    // ...and after which it is looked for again otherwise
    std::string to_master_;
    std::string to_user_;    // the pty's output not yet taken by the user's terminal (bounded)
    int out_nb_ = -1;        // out_ written without blocking: our own open of it, or out_ itself
    bool own_out_ = false;   // out_nb_ is our own open (else out_'s description, O_NONBLOCK while relayed)
    int out_flags_ = -1;     // out_'s flags as found, when out_nb_ is out_
    // Terminal queries in the command's output (cursor position, device
    // attributes, colours...) with no typed input since: their answers may
    // still be on the way. `da_` counts device-attribute queries among them.
    bool dropped_ = false;   // output dropped at the end: the terminal took nothing
    bool query_ = false;
    int da_ = 0;
    // The output scanner's state: where in an escape sequence it is.
    unsigned char esc_ = 0, csi_lead_ = 0, csi_inter_ = 0;
    int csi_num_ = 0, str_len_ = 0;
    bool csi_first_ = true, str_query_ = false;
    char str_head_[2] = {0, 0};
    std::string slave_path_;
};

}  // namespace dsh::terminal
