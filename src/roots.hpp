// Writable roots, resolved once. A root is opened component by component
// (O_PATH, never following a symlink blindly) and the descriptor, not the
// path, is what every runner grants: the Landlock rule is added on it and
// bwrap binds it (--bind-fd). So a path swapped after resolution, or a
// symlink planted by an earlier confined run, cannot widen what is granted.
//
// Rules (docs/DECISIONS.md "Writable roots are descriptors"):
// - a symlink on the way is followed only when the directory that holds it is
//   not writable by the caller: anything the caller can write, an earlier
//   confined run could have written too (it runs as the caller);
// - a root is never /, never under /proc, /sys or /dev, never on a kernel
//   interface file system (procfs, sysfs, cgroupfs, debugfs, ...), never the
//   devtmpfs behind /dev, and never has such a file system mounted under it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "errors.hpp"

namespace dsh::roots {

// Enough free descriptors for a confined start (the roots' descriptors, our
// pipes, bwrap's, the stage's): counted before anything opens one, so a low
// limit fails closed with its own message instead of half way through.
Outcome check_fd_headroom();

struct Opened {
    int fd = -1;        // O_PATH (O_RDONLY where there is none), close-on-exec; owned by the process
    std::string path;   // canonical: the names walked, no symlink, no "." or ".."
    uint64_t dev = 0, ino = 0;
    bool directory = false;
};

// Why open_root refused.
enum class Refusal {
    System,   // a system call failed: `error` is its errno, `why` its text
    Planted,  // a symlink in a caller-writable directory
    Shape,    // not absolute, or a file where a directory was needed
};

// Resolves the absolute path `abs`. On failure returns false and says why in
// `why` (a clause to follow "it " for Planted and Shape, the errno's text for
// System).
bool open_root(const std::string& abs, Opened& out, std::string& why, Refusal& refusal, int& error);

// make_below's answer.
enum class Make {
    Made,     // the missing directories were made; `made` names the last
    Exists,   // the whole path exists (made meanwhile by someone else): grant it as any other
    Refused,  // not made: `why` is a clause saying why (a symlink on the way, outside home, ...)
    Failed,   // a system call failed: `error` is its errno
};

// What make_below made: the last directory's identity, for the grant to
// check that what it opened is that directory.
struct Made {
    std::string path;  // canonical: the names walked and made
    uint64_t dev = 0, ino = 0;
};

// The directories make_below made in this process, held until the run goes
// ahead: a run refused after they were made (a later --writable invalid, a
// runner refused, the command never started) leaves none of them behind.
// undo_made removes each that is still the one made and still empty, the
// last made first; keep_made: the command ran, they stay (they were asked
// for).
void undo_made() noexcept;
void keep_made() noexcept;

// Names make_below never makes (issue 42): `anywhere` in any position
// (.git, the agent and editor control files), `home` as a path relative to
// the home (.ssh, .local/bin, the shell start-up files) or below it.
struct NeverMade {
    std::vector<std::string> anywhere, home;
};

// mkdir -p for a --writable path that does not exist, below the caller's
// home only: `abs` (absolute, as given) is walked from / as open_root walks
// it up to its first missing name; that point must be `home` (opened with
// open_root) or lie below it, reached with no symlink at or below the home
// (not even one the caller could not write: nothing is made through a
// link), and every name still to make must be a plain name (no "..") that
// is not in `never`. Each is made with mode 0700 (the umask held off) by
// mkdirat on its parent's descriptor, owned by the process's uid and gid
// (the caller: dsh-confine is not set-uid; under sudo, root, whose home is
// /root). A name made by someone else meanwhile is taken only if it is a
// directory (never followed if it is a link).
// `dry`: every check, nothing made (explain, check): Made with `path` only.
Make make_below(const std::string& abs, const Opened& home, const NeverMade& never, bool dry, Made& made,
                std::string& why, int& error);

// "it is under /proc, a kernel interface" when `path` (lexically) lies under
// /proc, /sys or /dev, else empty. Checked on the path as given too: its magic
// links (/proc/self/cwd, /proc/self/fd/N) lead anywhere.
std::string kernel_prefix(const std::string& path);

// Why `r` may never be writable (a kernel interface), or empty when it may be.
std::string forbidden(const Opened& r);

}  // namespace dsh::roots
