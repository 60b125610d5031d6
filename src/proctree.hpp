#pragma once
// The process tree below this process: how the parent that stays beside a
// command ends what the command started (its descendants at exit, a
// timeout's SIGTERM and SIGKILL). One mechanism for both (issue 15's
// descendants and issue 21's timeout used to have one each).
//
// Linux reads the tree from /proc (each thread's `children` list, or every
// process's parent where the kernel has no such list). Elsewhere the tree is
// not visible: nothing is found, nothing signalled.

#include <set>
#include <string>
#include <vector>

#include <sys/types.h>

namespace dsh::proctree {

// Makes this process the subreaper of its descendants: orphans reparent to
// it, so that they stay in the tree and can be found and ended.
bool become_subreaper();

// Signals every live descendant at depth > skip_depth (1: our children).
// Each is held by a pidfd and checked to be still the child of the process
// it was listed under before it is signalled, so a pid reused meanwhile by an
// unrelated process is never signalled. Returns how many were signalled.
int signal_all(int sig, int skip_depth);

// Ends every descendant (issue 38): freezes the tree first (SIGSTOP in
// rounds until two rounds in a row find the same processes, all stopped),
// then SIGKILLs in rounds until a round finds none alive. A process forked or
// reparented to us during a round is found in the next; no round that
// signals nobody ends the loop while any process of the run is there. Reaps
// the ones that are our own children except `keep` (the caller reaps it).
// Bounded by `budget_ms`: what is still alive then is returned in `left`
// (never claimed as killed). `killed`: the processes it SIGKILLed (zombies,
// which ended on their own, are not counted).
struct End {
    std::set<long> killed;
    std::vector<long> left;
};
inline constexpr double kEndBudgetMs = 5000;
End end_all(pid_t keep, double budget_ms = kEndBudgetMs);

// Reaps the descendants that came to us and have ended (never `keep`), so
// that a long run leaves no zombies.
void reap_orphans(pid_t keep);

// Fields of /proc/PID/stat (state 0: gone or unreadable).
struct Stat {
    char state = 0;
    long ppid = -1;
    long threads = 0;        // the thread group's count (a zombie leader with threads left: > 1)
    std::string start_time;  // clock ticks since boot: with the pid, names one process
};
Stat stat_of(long pid);

// The children of pid (of every one of its threads).
std::vector<long> children(long pid);

}  // namespace dsh::proctree
