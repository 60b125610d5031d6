// The allow-list's way out of the command's network namespace (issue 19;
// docs/DECISIONS.md, "The allow-list"): a listening socket made inside the
// namespace before the command starts and handed to dsh-confine over an
// inherited socketpair. A socket stays in the namespace it was made in, so
// dsh-confine, outside, accepts the command's connections on it and connects
// out through the host's network; nothing of ours runs inside.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dsh::net {

// Inside the namespace, before exec: listens on 127.0.0.1:`port` (0: a port
// the kernel picks; the namespace is new, so any port is free), sends the socket and its port over `channel` (SCM_RIGHTS, one
// message) and closes its own copy. False with `err` set when any step fails.
// Async-signal-safe system calls only: it may run between fork and exec.
bool hand_out_listener(int channel, uint16_t& port, int& err) noexcept;

// In dsh-confine: the listener and its port, waiting at most `timeout_ms`.
// False (fd -1) when the other side closed without sending or the time ran out.
bool receive_listener(int channel, int timeout_ms, int& fd, uint16_t& port);

// The variables that point clients at the proxy (curl, python, git, npm,
// yarn, pip, node), with `direct` (net::direct_loopback: the loopback
// spellings the list does not allow) excluded by NO_PROXY.
std::vector<std::pair<std::string, std::string>> proxy_environment(uint16_t port, const std::string& direct);

}  // namespace dsh::net
