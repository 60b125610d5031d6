#include "net_relay.hpp"

#include "fd_pass.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dsh::net {

bool hand_out_listener(int channel, uint16_t& port, int& err) noexcept {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return err = errno, false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    socklen_t len = sizeof a;
    // The backlog is what makes the first connection safe: the kernel
    // completes it and queues it until the proxy accepts.
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 511) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        err = errno;
        ::close(fd);
        return false;
    }
    port = ntohs(a.sin_port);
    const uint8_t data[2] = {static_cast<uint8_t>(port >> 8), static_cast<uint8_t>(port & 0xff)};
    const ssize_t n = fdpass::send(channel, data, sizeof data, fd);
    const int saved = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(sizeof data)) return err = n < 0 ? saved : EPROTO, false;
    return true;
}

bool receive_listener(int channel, int timeout_ms, int& fd, uint16_t& port) {
    fd = -1;
    pollfd p{channel, POLLIN, 0};
    int r;
    do r = ::poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r <= 0) return false;
    uint8_t data[2] = {0, 0};
    const ssize_t n = fdpass::receive(channel, data, sizeof data, fd);
    if (n != static_cast<ssize_t>(sizeof data) || fd < 0) {
        if (fd >= 0) ::close(fd);
        fd = -1;
        return false;
    }
    // It must be what was promised: a listening TCP socket.
    int listening = 0, type = 0;
    socklen_t len = sizeof listening;
    socklen_t tlen = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening ||
        ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM) {
        ::close(fd);
        fd = -1;
        return false;
    }
    port = static_cast<uint16_t>(data[0] << 8 | data[1]);
    return true;
}

std::vector<std::pair<std::string, std::string>> proxy_environment(uint16_t port, const std::string& direct) {
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    const std::string& none = direct;
    return {
        {"HTTP_PROXY", url},        {"HTTPS_PROXY", url},        {"ALL_PROXY", url},
        {"http_proxy", url},        {"https_proxy", url},        {"all_proxy", url},
        {"NO_PROXY", none},         {"no_proxy", none},
        {"npm_config_proxy", url},  {"npm_config_https_proxy", url},
        {"YARN_HTTP_PROXY", url},   {"YARN_HTTPS_PROXY", url},
        {"PIP_PROXY", url},         {"NODE_USE_ENV_PROXY", "1"},
    };
}

}  // namespace dsh::net
