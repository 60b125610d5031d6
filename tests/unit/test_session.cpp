#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/session.hpp"

using namespace dsh;

namespace {
std::string ev(const std::string& mode, int seq = 1) {
    return "{\"type\":\"sandbox/mode\",\"seq\":" + std::to_string(seq) + ",\"time\":1,\"data\":{\"mode\":\"" + mode +
           "\"}}\n";
}
std::string log_error(const std::string& text) {
    SessionState s;
    Outcome o = fold_session_log(text, "/s.jsonl", s);
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::SessionInvalid);
    CHECK(o.exit_status() == 125);
    return o.message;
}
struct TempFile {
    std::string path;
    TempFile() {
        char tmpl[] = "/var/tmp/dsh-unit-session-XXXXXX";
        int fd = ::mkstemp(tmpl);
        REQUIRE(fd >= 0);
        ::close(fd);
        path = tmpl;
    }
    ~TempFile() { ::unlink(path.c_str()); }
};
}  // namespace

TEST_CASE("session: an empty log has no mode") {
    SessionState s;
    REQUIRE(fold_session_log("", "/s", s));
    CHECK_FALSE(s.mode);
    REQUIRE(fold_session_log("\n\n", "/s", s));
    CHECK_FALSE(s.mode);
    REQUIRE(fold_session_log("{\"type\":\"session\",\"cwd\":\"/w\"}\n", "/s", s));
    CHECK_FALSE(s.mode);
}

TEST_CASE("session: the last sandbox/mode event wins") {
    SessionState s;
    REQUIRE(fold_session_log(ev("danger-full-access", 1) + "{\"type\":\"user/message\",\"seq\":2}\n" +
                                 ev("read-only", 3) + ev("workspace-write", 4) + "{\"type\":\"other\"}\n",
                             "/s", s));
    CHECK(s.mode == Mode::WorkspaceWrite);
    CHECK(s.mode_line == 4);
    CHECK(s.lines == 5);
    CHECK(s.max_seq == uint64_t{4});
    CHECK(s.source.empty());
    // Narrowing is a switch like any other.
    REQUIRE(fold_session_log(ev("danger-full-access") + ev("read-only"), "/s", s));
    CHECK(s.mode == Mode::ReadOnly);
}

TEST_CASE("session: the header's cwd is the session's, and immutable") {
    SessionState s;
    REQUIRE(fold_session_log("{\"type\":\"session\",\"id\":\"a\",\"cwd\":\"/w/proj\"}\n" + ev("read-only"), "/s", s));
    CHECK(s.cwd == std::string("/w/proj"));
    CHECK(s.cwd_line == 1);
    // A header without a cwd names none; the same header again changes nothing.
    REQUIRE(fold_session_log("{\"type\":\"session\"}\n", "/s", s));
    CHECK_FALSE(s.cwd);
    REQUIRE(fold_session_log("{\"type\":\"session\",\"cwd\":\"/w\"}\n{\"type\":\"session\",\"cwd\":\"/w\"}\n", "/s", s));
    CHECK(s.cwd == std::string("/w"));
    CHECK(log_error("{\"type\":\"session\",\"cwd\":\"/w\"}\n{\"type\":\"session\",\"cwd\":\"/x\"}\n") ==
          "session log /s.jsonl line 2: session header changes the session's cwd from \"/w\" (line 1); a session's "
          "cwd is immutable: start a new log");
    CHECK(log_error("{\"type\":\"session\",\"cwd\":\"w\"}\n") ==
          "session log /s.jsonl line 1: session header \"cwd\" must be an absolute path");
    CHECK(log_error("{\"type\":\"session\",\"cwd\":7}\n") ==
          "session log /s.jsonl line 1: session header \"cwd\" must be a string");
}

TEST_CASE("session: data.source is kept") {
    SessionState s;
    REQUIRE(fold_session_log(
        R"({"type":"sandbox/mode","seq":1,"time":2,"data":{"mode":"workspace-write","source":"delegation"}})", "/s", s));
    CHECK(s.mode == Mode::WorkspaceWrite);
    CHECK(s.source == "delegation");
    // A later runtime switch has no source.
    REQUIRE(fold_session_log(
        std::string(R"({"type":"sandbox/mode","data":{"mode":"workspace-write","source":"delegation"}})") + "\n" +
            ev("read-only"),
        "/s", s));
    CHECK(s.source.empty());
    CHECK(log_error(R"({"type":"sandbox/mode","data":{"mode":"read-only","source":1}})") ==
          "session log /s.jsonl line 1: sandbox/mode \"data.source\" must be a string");
}

TEST_CASE("session: an unknown mode is the seed's error, never a fallback") {
    CHECK(log_error(ev("read-only") + ev("write-everything")) ==
          "session log /s.jsonl line 2: sandbox/mode carries unknown mode \"write-everything\"");
    CHECK(log_error(R"({"type":"sandbox/mode","data":{"mode":7}})") ==
          "session log /s.jsonl line 1: sandbox/mode carries unknown mode 7");
    CHECK(log_error(R"({"type":"sandbox/mode","data":{"mode":null}})") ==
          "session log /s.jsonl line 1: sandbox/mode carries unknown mode null");
    CHECK(log_error(R"({"type":"sandbox/mode","data":{}})") ==
          "session log /s.jsonl line 1: sandbox/mode carries unknown mode undefined");
    CHECK(log_error(R"({"type":"sandbox/mode"})") == "session log /s.jsonl line 1: sandbox/mode event has no \"data\" object");
    CHECK(log_error(R"({"type":"sandbox/mode","data":"read-only"})") ==
          "session log /s.jsonl line 1: sandbox/mode event has no \"data\" object");
}

TEST_CASE("session: a malformed line names the line") {
    CHECK_THAT(log_error(ev("read-only") + "{\"type\":\"sandbox/mo\n" + ev("danger-full-access")),
               Catch::StartsWith("session log /s.jsonl line 2: not valid JSON"));
    // A torn last line (no newline) is still a line.
    CHECK_THAT(log_error(ev("read-only") + ev("read-only") + "{\"type\":\"sandbox/mode\",\"da"),
               Catch::StartsWith("session log /s.jsonl line 3: not valid JSON"));
    CHECK(log_error(ev("read-only") + "[1,2]\n") == "session log /s.jsonl line 2: not a JSON object");
    CHECK(log_error("\n\n\"x\"\n") == "session log /s.jsonl line 3: not a JSON object");
    CHECK(log_error("{\"seq\":1}\n") == "session log /s.jsonl line 1: no string \"type\"");
    CHECK(log_error("{\"type\":5}\n") == "session log /s.jsonl line 1: no string \"type\"");
    CHECK_THAT(log_error("   \n"), Catch::StartsWith("session log /s.jsonl line 1: not valid JSON"));
}

TEST_CASE("session: a huge log folds, last event wins") {
    std::string log;
    log.reserve(20 << 20);
    const std::string filler =
        "{\"type\":\"assistant/chunk\",\"seq\":0,\"data\":{\"text\":\"" + std::string(100, 'x') + "\"}}\n";
    for (int i = 0; i < 100000; ++i) {
        log += filler;
        if (i % 1000 == 0) log += ev(i % 2000 == 0 ? "danger-full-access" : "read-only", i);
    }
    log += ev("workspace-write", 123456);
    SessionState s;
    REQUIRE(fold_session_log(log, "/s", s));
    CHECK(s.mode == Mode::WorkspaceWrite);
    CHECK(s.lines == 100000 + 100 + 1);
    CHECK(s.max_seq == uint64_t{123456});

    // The same through a file (read in chunks, lines spanning chunk edges).
    TempFile f;
    {
        std::ofstream o(f.path, std::ios::binary);
        o << log;
    }
    SessionState fs;
    REQUIRE(read_session(f.path, fs));
    CHECK(fs.mode == Mode::WorkspaceWrite);
    CHECK(fs.mode_line == s.mode_line);
    CHECK(fs.lines == s.lines);
}

TEST_CASE("session: fed in chunks split anywhere, the fold is the same") {
    const std::string logs[] = {
        ev("read-only") + "\n" + "{\"type\":\"other\",\"seq\":7}\n" + ev("workspace-write", 3),
        ev("danger-full-access") + "{\"type\":\"sandbox/mode\",\"da",  // torn last line
        ev("read-only") + "[1]\n" + ev("workspace-write"),
    };
    for (const auto& log : logs) {
        SessionState whole;
        const Outcome one = fold_session_log(log, "/s", whole);
        for (size_t a = 0; a <= log.size(); ++a)
            for (size_t b = a; b <= log.size(); b += 7) {
                SessionFolder f("/s");
                Outcome o = f.feed(std::string_view(log).substr(0, a));
                if (o) o = f.feed(std::string_view(log).substr(a, b - a));
                if (o) o = f.feed(std::string_view(log).substr(b));
                if (o) o = f.finish();
                CAPTURE(log, a, b);
                REQUIRE(o.ok == one.ok);
                CHECK(o.message == one.message);
                if (!o) continue;
                CHECK(f.state().mode == whole.mode);
                CHECK(f.state().mode_line == whole.mode_line);
                CHECK(f.state().lines == whole.lines);
                CHECK(f.state().max_seq == whole.max_seq);
            }
    }
}

TEST_CASE("session: the event line set-mode writes") {
    CHECK(mode_event_line(Mode::WorkspaceWrite, 7, 1700000000123) ==
          "{\"type\":\"sandbox/mode\",\"seq\":7,\"time\":1700000000123,\"data\":{\"mode\":\"workspace-write\"}}\n");
}

TEST_CASE("session: append creates, continues seq, and refuses a broken log") {
    TempFile f;
    ::unlink(f.path.c_str());
    REQUIRE(append_mode_event(f.path, Mode::WorkspaceWrite));
    REQUIRE(append_mode_event(f.path, Mode::DangerFullAccess));
    SessionState s;
    REQUIRE(read_session(f.path, s));
    CHECK(s.mode == Mode::DangerFullAccess);
    CHECK(s.lines == 2);
    CHECK(s.max_seq == uint64_t{2});
    {
        std::ofstream o(f.path, std::ios::app);
        o << "{\"type\":\"user/message\",\"seq\":41}\n";
    }
    REQUIRE(append_mode_event(f.path, Mode::ReadOnly));
    REQUIRE(read_session(f.path, s));
    CHECK(s.mode == Mode::ReadOnly);
    CHECK(s.max_seq == uint64_t{42});
    {
        std::ofstream o(f.path, std::ios::app);
        o << "{\"type\":\"sandbox/mo";
    }
    Outcome o = append_mode_event(f.path, Mode::WorkspaceWrite);
    REQUIRE_FALSE(o);
    CHECK_THAT(o.message, Catch::Contains("line 5: not valid JSON"));
}

TEST_CASE("session: a missing log is an error") {
    SessionState s;
    Outcome o = read_session("/nonexistent/dsh/session.jsonl", s);
    REQUIRE_FALSE(o);
    CHECK(o.message == "session log /nonexistent/dsh/session.jsonl: cannot open: No such file or directory");
}

TEST_CASE("session: a deep or long line is a clean error, and the log size is bounded") {
    auto deep = [](size_t n) { return std::string(n, '[') + std::string(n, ']'); };
    CHECK(log_error(ev("read-only") + "{\"type\":\"x\",\"d\":" + deep(64) + "}\n") ==
          "session log /s.jsonl line 2: nested deeper than 64 levels");
    // A deep "mode" used to reach json::dump in the message: now refused before parsing.
    CHECK(log_error("{\"type\":\"sandbox/mode\",\"data\":{\"mode\":" + deep(30000) + "}}\n") ==
          "session log /s.jsonl line 1: nested deeper than 64 levels");
    CHECK(log_error(ev("read-only") + "{\"type\":\"x\",\"d\":" + deep(200000) + "}\n") ==
          "session log /s.jsonl line 2: longer than 65536 bytes; start a new log");
    // Fed in pieces, a line without its end is bounded too (memory stays bounded).
    SessionFolder f("/s.jsonl");
    REQUIRE(f.feed(ev("read-only")));
    Outcome o = Outcome::success();
    for (int i = 0; i < 100 && o; ++i) o = f.feed(std::string(4096, ' '));
    REQUIRE_FALSE(o);
    CHECK(o.message == "session log /s.jsonl line 2: longer than 65536 bytes; start a new log");
    // The whole log: many fine lines beyond the bound are refused.
    SessionFolder g("/s.jsonl");
    const std::string line = ev("read-only");
    o = Outcome::success();
    for (size_t n = 0; n <= kMaxSessionBytes / line.size() + 1 && o; ++n) o = g.feed(line);
    REQUIRE_FALSE(o);
    CHECK(o.message == "session log /s.jsonl: larger than 16777216 bytes; start a new log");
}

TEST_CASE("session: a symlink, a FIFO or a file others can write is never read or appended to") {
    TempFile f;
    REQUIRE(append_mode_event(f.path, Mode::ReadOnly));
    const std::string link = f.path + ".link";
    REQUIRE(::symlink(f.path.c_str(), link.c_str()) == 0);
    SessionState s;
    Outcome o = read_session(link, s);
    REQUIRE_FALSE(o);
    CHECK(o.message == "session log " + link + ": is a symlink, which dsh-confine does not follow here; name the "
                                               "file itself");
    o = append_mode_event(link, Mode::DangerFullAccess);
    REQUIRE_FALSE(o);
    ::unlink(link.c_str());
    // A dangling link: nothing is created at its target.
    const std::string target = f.path + ".target";
    REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
    CHECK_FALSE(append_mode_event(link, Mode::DangerFullAccess));
    CHECK(::access(target.c_str(), F_OK) != 0);
    ::unlink(link.c_str());
    // The log is unchanged: read-only still.
    REQUIRE(read_session(f.path, s));
    CHECK(s.mode == Mode::ReadOnly);
    CHECK(s.lines == 1);

    const std::string fifo = f.path + ".fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    o = read_session(fifo, s);
    REQUIRE_FALSE(o);
    CHECK(o.message == "session log " + fifo + ": not a regular file");
    CHECK_FALSE(append_mode_event(fifo, Mode::ReadOnly));
    ::unlink(fifo.c_str());

    ::chmod(f.path.c_str(), 0664);
    o = read_session(f.path, s);
    REQUIRE_FALSE(o);
    CHECK(o.message == "session log " + f.path + ": writable by group or others (mode 0664), so another user could "
                                                 "change what the next run does; chmod go-w " + f.path);
}

TEST_CASE("session: set-mode creates the log 0644 whatever the umask") {
    TempFile f;
    ::unlink(f.path.c_str());
    const mode_t old = ::umask(0);
    const Outcome o = append_mode_event(f.path, Mode::ReadOnly);
    ::umask(old);
    REQUIRE(o);
    struct stat st {};
    REQUIRE(::stat(f.path.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0644);
}

TEST_CASE("session: the network is part of the policy (issue 17)") {
    SessionState s;
    const std::string off = "{\"type\":\"sandbox/mode\",\"seq\":1,\"time\":1,\"data\":{\"mode\":\"read-only\","
                            "\"network\":\"off\"}}\n";
    REQUIRE(fold_session_log(off, "/s", s));
    REQUIRE(s.network);
    CHECK(*s.network == Network::Off);
    // The last event decides: one without a network sets none (the config's or the default then).
    REQUIRE(fold_session_log(off + ev("workspace-write", 2), "/s", s));
    CHECK_FALSE(s.network);
    // Strict: an unknown or non-string network is an error, never a fallback to a wider one.
    CHECK(log_error("{\"type\":\"sandbox/mode\",\"data\":{\"mode\":\"read-only\",\"network\":\"none\"}}\n") ==
          "session log /s.jsonl line 1: sandbox/mode carries unknown network \"none\" (off, loopback, host or allow)");
    CHECK(log_error("{\"type\":\"sandbox/mode\",\"data\":{\"mode\":\"read-only\",\"network\":0}}\n").find(
              "unknown network 0") != std::string::npos);
    CHECK(mode_event_line(Mode::ReadOnly, 2, 5, Network::Loopback) ==
          "{\"type\":\"sandbox/mode\",\"seq\":2,\"time\":5,\"data\":{\"mode\":\"read-only\",\"network\":\"loopback\"}}\n");
}

TEST_CASE("session: set-mode carries the log's network over unless it names one") {
    TempFile f;
    REQUIRE(append_mode_event(f.path, Mode::WorkspaceWrite, Network::Off));
    REQUIRE(append_mode_event(f.path, Mode::ReadOnly));  // names no network: off stays
    SessionState s;
    REQUIRE(read_session(f.path, s));
    CHECK(s.mode == Mode::ReadOnly);
    REQUIRE(s.network);
    CHECK(*s.network == Network::Off);
    REQUIRE(append_mode_event(f.path, Mode::ReadOnly, Network::Host));
    REQUIRE(read_session(f.path, s));
    CHECK(*s.network == Network::Host);
}

TEST_CASE("session: the allow-list is recorded with its entries and read back (issue 19)") {
    CHECK(mode_event_line(Mode::ReadOnly, 3, 9, Network::Loopback, {"allowed.test", "10.0.0.0/8:443"}, {"evil.test"}) ==
          "{\"type\":\"sandbox/mode\",\"seq\":3,\"time\":9,\"data\":{\"mode\":\"read-only\",\"network\":\"allow\","
          "\"allow\":[\"allowed.test\",\"10.0.0.0/8:443\"],\"deny\":[\"evil.test\"]}}\n");
    SessionState s;
    REQUIRE(fold_session_log(mode_event_line(Mode::ReadOnly, 3, 9, Network::Loopback, {"allowed.test"}), "/s", s));
    REQUIRE(s.network);
    CHECK(*s.network == Network::Loopback);
    CHECK(s.net_allow == std::vector<std::string>{"allowed.test"});
    CHECK(s.net_deny.empty());
    // Strict: no entries, a bad entry, a non-list: errors, never a wider network.
    CHECK(log_error("{\"type\":\"sandbox/mode\",\"data\":{\"mode\":\"read-only\",\"network\":\"allow\"}}\n") ==
          "session log /s.jsonl line 1: sandbox/mode with network \"allow\" needs \"data.allow\": a non-empty list of entries");
    CHECK(log_error("{\"type\":\"sandbox/mode\",\"data\":{\"mode\":\"read-only\",\"network\":\"allow\",\"allow\":[]}}\n")
              .find("non-empty list") != std::string::npos);
    CHECK(log_error("{\"type\":\"sandbox/mode\",\"data\":{\"mode\":\"read-only\",\"network\":\"allow\",\"allow\":[\"*\"]}}\n")
              .find("session log /s.jsonl line 1: sandbox/mode: ") == 0);
    CHECK(log_error("{\"type\":\"sandbox/mode\",\"data\":{\"mode\":\"read-only\",\"network\":\"allow\",\"allow\":[\"a.test\"],"
              "\"deny\":\"b.test\"}}\n")
              .find("needs \"data.deny\": a list of entries") != std::string::npos);
}

TEST_CASE("session: set-mode carries the allow-list over with the network") {
    TempFile f;
    REQUIRE(append_mode_event(f.path, Mode::ReadOnly, Network::Loopback, {"allowed.test"}, {"evil.test"}));
    REQUIRE(append_mode_event(f.path, Mode::WorkspaceWrite));  // names no network: the list stays
    SessionState s;
    REQUIRE(read_session(f.path, s));
    CHECK(*s.mode == Mode::WorkspaceWrite);
    CHECK(*s.network == Network::Loopback);
    CHECK(s.net_allow == std::vector<std::string>{"allowed.test"});
    CHECK(s.net_deny == std::vector<std::string>{"evil.test"});
    REQUIRE(append_mode_event(f.path, Mode::ReadOnly, Network::Loopback));  // plain loopback: the list goes
    REQUIRE(read_session(f.path, s));
    CHECK(s.net_allow.empty());
}
