// One message carrying at most one descriptor over a socket (SCM_RIGHTS): how
// a process inside the sandbox hands dsh-confine a kernel object it made
// there (the allow-list's listener, the stage's own pidfd).
#pragma once

#include <cstddef>
#include <sys/types.h>

namespace dsh::fdpass {

// Sends `len` bytes of `data` and `fd` (none when -1) as one message.
// Returns what sendmsg returns. Async-signal-safe: it may run between fork
// and exec.
ssize_t send(int channel, const void* data, size_t len, int fd) noexcept;

// Receives one message of at most `len` bytes into `buf`, and the descriptor
// it carried in `fd` (close-on-exec; -1 when none). A message that carried
// anything else (more descriptors, or a truncated set) keeps none of it:
// its descriptors are closed and `fd` is -1. With `sender`, the sending
// process's pid as the kernel gives it in our pid namespace where the
// channel has SO_PASSCRED (0 otherwise). Returns what recvmsg returns.
ssize_t receive(int channel, void* buf, size_t len, int& fd, pid_t* sender = nullptr) noexcept;

}  // namespace dsh::fdpass
