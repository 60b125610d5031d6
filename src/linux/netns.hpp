// The Landlock runner's own network namespace for --net loopback (issue 17):
// a private loopback, made in the process that becomes the command, before
// Landlock and seccomp. As root: unshare(CLONE_NEWNET). As a user:
// CLONE_NEWUSER|CLONE_NEWNET with the caller's uid and gid mapped to
// themselves (setgroups denied, as the kernel requires for an unprivileged
// gid_map). Then `lo` is brought up (SIOCSIFFLAGS).
#pragma once

#include <string>

#include "../errors.hpp"

namespace dsh::netns {

// What entering needs, made in the launcher: the child only makes system
// calls on it (see harden.hpp).
struct Plan {
    bool active = false;  // false: nothing to enter
    bool user = false;    // CLONE_NEWUSER too (the caller is not root)
    char uid_map[48] = {};
    char gid_map[48] = {};
};

// For the caller as it is (geteuid/getegid).
Plan make_plan();

// Makes the namespace and brings lo up. Faults: Step::NetNamespace (arg 1
// when a user namespace was asked too), Step::NetIdMap (arg 0 setgroups,
// 1 uid_map, 2 gid_map), Step::LoopbackUp.
bool enter(const Plan& p, Fault& f) noexcept;

// The maps of a user namespace just made (by this process, or by the clone
// it is): setgroups denied, then the uid and gid maps. Fault: Step::NetIdMap
// (arg 0 setgroups, 1 uid_map, 2 gid_map). The Landlock runner's network
// namespace and supervise's PID namespace (spawn.hpp) write them here.
bool write_id_maps(const char* uid_map, const char* gid_map, Fault& f) noexcept;

// Whether this host lets this caller make it: tried once in a child (the
// launcher's own namespaces are untouched), the answer kept for the process.
// Empty: it can; otherwise the failed step, in fault_outcome's words.
const std::string& check(const Plan& p);

}  // namespace dsh::netns
