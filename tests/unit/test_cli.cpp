#include <catch2/catch.hpp>

#include "../../src/cli.hpp"

using namespace dsh;

namespace {
using Words = std::vector<std::string>;

Outcome parse(std::vector<const char*> args, Request& r) {
    args.insert(args.begin(), "dsh-confine");
    return parse_cli(static_cast<int>(args.size()), args.data(), r);
}

// The message of a line that must fail as a usage error.
std::string error_of(std::vector<const char*> args) {
    Request r;
    Outcome o = parse(std::move(args), r);
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::Usage);
    CHECK(o.exit_status() == 125);
    return o.message;
}
}  // namespace

TEST_CASE("the command is everything after the first --, untouched", "[cli]") {
    Request r;
    REQUIRE(parse({"--mode", "workspace-write", "--root", "/w", "--writable", "/a", "--writable", "/b", "--",
                   "sh", "-c", "x --mode y", "--", "--help"},
                  r));
    CHECK(r.action == Action::Run);
    CHECK(*r.mode == "workspace-write");
    CHECK(*r.root == "/w");
    CHECK(r.writable == Words{"/a", "/b"});
    CHECK(r.argv == Words{"sh", "-c", "x --mode y", "--", "--help"});
}

TEST_CASE("our options end at the first word that is not ours: nothing after the command is ours", "[cli]") {
    // Issue 13, item 0: these words used to confine less than asked.
    Request r;
    REQUIRE(parse({"touch", "/outside/x", "--mode", "danger-full-access"}, r));
    CHECK(r.action == Action::Run);
    CHECK_FALSE(r.mode);
    CHECK(r.argv == Words{"touch", "/outside/x", "--mode", "danger-full-access"});

    Request s;
    REQUIRE(parse({"--mode", "workspace-write", "touch", "x", "--runner=custom", "--mode=danger-full-access",
                   "--config", "/evil.json", "--escalate", "danger-full-access", "--", "y"},
                  s));
    CHECK(*s.mode == "workspace-write");
    CHECK_FALSE(s.runner);
    CHECK_FALSE(s.config);
    CHECK_FALSE(s.escalate);
    CHECK(s.argv == Words{"touch", "x", "--runner=custom", "--mode=danger-full-access", "--config", "/evil.json",
                          "--escalate", "danger-full-access", "--", "y"});

    Request e;
    REQUIRE(parse({"echo", "--supervise"}, e));
    CHECK_FALSE(e.supervise);
    CHECK(e.argv == Words{"echo", "--supervise"});

    Request g;
    REQUIRE(parse({"git", "log", "--root"}, g));
    CHECK_FALSE(g.root);
    CHECK(g.argv == Words{"git", "log", "--root"});

    // --help and --version after the command are the command's too.
    Request h;
    REQUIRE(parse({"ls", "--help", "--version"}, h));
    CHECK(h.action == Action::Run);
    CHECK(h.argv == Words{"ls", "--help", "--version"});

    // A value is one word, so the word after it is the command.
    Request v;
    REQUIRE(parse({"--root", "git", "log", "--root"}, v));
    CHECK(*v.root == "git");
    CHECK(v.argv == Words{"log", "--root"});
}

TEST_CASE("explain: the same rule after the subcommand", "[cli]") {
    Request r;
    REQUIRE(parse({"--mode", "workspace-write", "explain", "--json", "touch", "x", "--mode", "danger-full-access"},
                  r));
    CHECK(r.action == Action::Explain);
    CHECK(r.json);
    CHECK(*r.mode == "workspace-write");
    CHECK(r.argv == Words{"touch", "x", "--mode", "danger-full-access"});

    Request d;
    REQUIRE(parse({"explain", "--", "--weird", "--json"}, d));
    CHECK_FALSE(d.json);
    CHECK(d.argv == Words{"--weird", "--json"});

    Request c;
    REQUIRE(parse({"explain", "--context", "--mode", "read-only"}, c));
    CHECK(c.context);
    CHECK(c.argv.empty());

    Request dr;
    REQUIRE(parse({"--dry-run", "ls", "--dry-run"}, dr));
    CHECK(dr.action == Action::Explain);
    CHECK(dr.argv == Words{"ls", "--dry-run"});
}

TEST_CASE("a subcommand's name is one only as the first word; after --, it is a command", "[cli]") {
    Request r;
    REQUIRE(parse({"--", "probe", "--json"}, r));
    CHECK(r.action == Action::Run);
    CHECK(r.argv == Words{"probe", "--json"});
    Request s;
    REQUIRE(parse({"echo", "probe"}, s));
    CHECK(s.argv == Words{"echo", "probe"});
}

TEST_CASE("every option takes exactly one value and the list options repeat", "[cli]") {
    Request r;
    REQUIRE(parse({"--writable", "/extra", "touch", "/extra/a"}, r));
    CHECK(r.writable == Words{"/extra"});
    CHECK(r.argv == Words{"touch", "/extra/a"});

    Request u;
    REQUIRE(parse({"--unsetenv", "HOME", "--unsetenv", "USER", "env"}, u));
    CHECK(u.unsetenv == Words{"HOME", "USER"});
    CHECK(u.argv == Words{"env"});

    Request k;
    REQUIRE(parse({"--keep-fd", "3", "--keep-fd=4", "--report-fd=5", "--writable=/a", "--writable", "/b", "true"},
                  k));
    CHECK(k.keep_fds == std::vector<int>{3, 4});
    CHECK(k.report_fd == 5);
    CHECK(k.writable == Words{"/a", "/b"});
}

TEST_CASE("--opt=value works for every value option", "[cli]") {
    Request r;
    REQUIRE(parse({"--mode=workspace-write", "--root=/w", "--runner=landlock", "--writable=/a", "--config=/c.json",
                   "--session=/s.jsonl", "--probe-timeout=250", "--report-fd=3", "--keep-fd=4",
                   "--escalate=danger-full-access", "--justification=a = b", "--approver=tty", "--setenv=A=b=c",
                   "--unsetenv=HOME", "--", "true"},
                  r));
    CHECK(*r.mode == "workspace-write");
    CHECK(*r.root == "/w");
    CHECK(*r.runner == "landlock");
    CHECK(r.writable == Words{"/a"});
    CHECK(*r.config == "/c.json");
    CHECK(*r.session == "/s.jsonl");
    CHECK(*r.probe_timeout_ms == 250);
    CHECK(r.report_fd == 3);
    CHECK(r.keep_fds == std::vector<int>{4});
    CHECK(*r.escalate == "danger-full-access");
    CHECK(*r.justification == "a = b");
    CHECK(*r.approver == "tty");
    CHECK(r.setenv == std::vector<std::pair<std::string, std::string>>{{"A", "b=c"}});
    CHECK(r.unsetenv == Words{"HOME"});
    Request e;
    REQUIRE(parse({"explain", "--platform=darwin", "--", "true"}, e));
    CHECK(*e.platform == "darwin");
    Request c;
    REQUIRE(parse({"check", "--write=/x"}, c));
    CHECK(*c.check_write == "/x");
    Request t;
    REQUIRE(parse({"self-test", "--binary=/b", "--attempt=tiocsti"}, t));
    CHECK(*t.selftest_binary == "/b");
    CHECK(*t.selftest_attempt == "tiocsti");
}

TEST_CASE("--setenv NAME=VALUE splits at the first =", "[cli]") {
    Request r;
    REQUIRE(parse({"--setenv", "A=x=y", "--setenv", "B=", "--setenv", "=v", "env"}, r));
    CHECK(r.setenv == std::vector<std::pair<std::string, std::string>>{{"A", "x=y"}, {"B", ""}, {"", "v"}});
    CHECK(r.argv == Words{"env"});
    // The two-word form is gone: its second word would be read as the command.
    CHECK(error_of({"--setenv", "FOO", "bar", "env"}) ==
          "option --setenv takes one word NAME=VALUE, not \"FOO\": --setenv FOO=VALUE");
}

TEST_CASE("subcommands", "[cli]") {
    Request p;
    REQUIRE(parse({"--config", "/c", "probe", "--json", "--runner", "bwrap", "--probe-timeout", "9"}, p));
    CHECK(p.action == Action::Probe);
    CHECK(p.json);
    CHECK(*p.config == "/c");
    CHECK(*p.runner == "bwrap");
    CHECK(*p.probe_timeout_ms == 9);

    Request c;
    REQUIRE(parse({"check", "--write", "/x", "--json", "--mode", "workspace-write"}, c));
    CHECK(c.action == Action::Check);
    CHECK(*c.check_write == "/x");
    CHECK(*c.mode == "workspace-write");

    Request s;
    REQUIRE(parse({"session", "set-mode", "/log", "workspace-write"}, s));
    CHECK(s.action == Action::SessionSetMode);
    CHECK(s.session_file == "/log");
    CHECK(s.session_mode == "workspace-write");

    Request t;
    REQUIRE(parse({"self-test", "--runner", "landlock", "--json"}, t));
    CHECK(t.action == Action::SelfTest);
    CHECK(*t.runner == "landlock");
}

TEST_CASE("usage errors: exact texts, one line, no library words", "[cli]") {
    CHECK(error_of({"--"}) == "no command given: dsh-confine [OPTIONS] -- COMMAND [ARG...]");
    CHECK(error_of({"--mode", "workspace-write", "--"}) == "no command given: dsh-confine [OPTIONS] -- COMMAND [ARG...]");
    CHECK(error_of({"--", ""}) == "the command name is empty");
    CHECK(error_of({""}) == "the command name is empty");

    CHECK(error_of({"--bogus", "--", "true"}) == "unknown option \"--bogus\"; Try 'dsh-confine --help'");
    CHECK(error_of({"--bogus=1", "true"}) == "unknown option \"--bogus\"; Try 'dsh-confine --help'");
    CHECK(error_of({"-la"}) == "unknown option \"-la\"; Try 'dsh-confine --help'");
    CHECK(error_of({"probe", "--bogus"}) == "unknown option \"--bogus\"; Try 'dsh-confine probe --help'");
    // After a word that looks like a command (here taken as --root's value).
    CHECK(error_of({"--root", "ls", "-la"}) ==
          "unknown option \"-la\"; if it is the command's, put the command after --: "
          "dsh-confine [OPTIONS] -- COMMAND [ARG...]");
    CHECK(error_of({"explain", "--platform", "linux", "-n"}) ==
          "unknown option \"-n\"; if it is the command's, put the command after --: "
          "dsh-confine [OPTIONS] -- COMMAND [ARG...]");
    CHECK(error_of({"check", "-n"}) == "unknown option \"-n\"; Try 'dsh-confine check --help'");
    // A near miss of an option this context accepts names it; far misses and ties do not guess.
    CHECK(error_of({"--supervsie", "--", "true"}) == "unknown option \"--supervsie\"; did you mean --supervise?");
    CHECK(error_of({"--writeable", "/x", "--", "true"}) == "unknown option \"--writeable\"; did you mean --writable?");
    CHECK(error_of({"probe", "--jsn"}) == "unknown option \"--jsn\"; did you mean --json?");
    // --json is not an option of a run: nothing near is offered from another context.
    CHECK(error_of({"--jsn", "--", "true"}) == "unknown option \"--jsn\"; Try 'dsh-confine --help'");

    CHECK(error_of({"--json", "probe"}) == "option --json does not apply here; Try 'dsh-confine --help'");
    CHECK(error_of({"probe", "--write", "/x"}) == "option --write does not apply here; Try 'dsh-confine probe --help'");
    CHECK(error_of({"session", "set-mode", "--mode", "x", "f", "m"}) ==
          "option --mode does not apply here; Try 'dsh-confine session set-mode --help'");

    CHECK(error_of({"--mode"}) == "option --mode needs a value: --mode MODE");
    CHECK(error_of({"--writable", "--mode", "x", "true"}) == "option --writable needs a value: --writable PATH");
    CHECK(error_of({"--root", "--", "true"}) == "option --root needs a value: --root DIR");
    CHECK(error_of({"check", "--write"}) == "option --write needs a value: --write PATH");
    CHECK(error_of({"--supervise=yes", "true"}) == "option --supervise takes no value: give it alone");
    CHECK(error_of({"--mode", "read-only", "--mode=workspace-write", "true"}) ==
          "option --mode is given twice: give it once");
    CHECK(error_of({"--root", "/a", "explain", "--root", "/b", "--", "true"}) ==
          "option --root is given twice: give it once");

    CHECK(error_of({"--report-fd", "x", "--", "true"}) ==
          "option --report-fd takes a file descriptor number (0, 1, 2, ...), not \"x\"");
    CHECK(error_of({"--keep-fd", "-4", "--", "true"}) ==
          "option --keep-fd takes a file descriptor number (0, 1, 2, ...), not \"-4\"");
    CHECK(error_of({"--keep-fd", "0x3", "true"}) ==
          "option --keep-fd takes a file descriptor number (0, 1, 2, ...), not \"0x3\"");
    CHECK(error_of({"--report-fd", "99999999999", "true"}) ==
          "option --report-fd takes a file descriptor number (0, 1, 2, ...), not \"99999999999\"");
    CHECK(error_of({"--probe-timeout", "0", "--", "true"}) ==
          "option --probe-timeout takes a positive whole number of milliseconds, not \"0\"");
    CHECK(error_of({"--probe-timeout", "1.5", "true"}) ==
          "option --probe-timeout takes a positive whole number of milliseconds, not \"1.5\"");

    CHECK(error_of({"session"}) ==
          "session needs a subcommand: dsh-confine session set-mode FILE MODE, or session show FILE");
    CHECK(error_of({"session", "list"}) ==
          "unknown session subcommand \"list\": dsh-confine session set-mode FILE MODE, or session show FILE");
    CHECK(error_of({"session", "show"}) == "session show takes one FILE: dsh-confine session show FILE");
    CHECK(error_of({"session", "show", "/a", "/b"}) == "session show takes one FILE: dsh-confine session show FILE");
    CHECK(error_of({"session", "set-mode", "/log"}) ==
          "session set-mode takes a FILE and a MODE: dsh-confine session set-mode FILE MODE");
    CHECK(error_of({"session", "set-mode", "/log", "read-only", "extra"}) ==
          "session set-mode takes a FILE and a MODE: dsh-confine session set-mode FILE MODE");
    CHECK(error_of({"check", "--mode", "read-only"}) ==
          "check asks about one path and one access: dsh-confine check --write PATH, or check --read PATH");
    CHECK(error_of({"check", "--write", "/x", "--", "true"}) ==
          "check takes no command after --; Try 'dsh-confine check --help'");
    CHECK(error_of({"probe", "ls"}) ==
          "probe takes no argument \"ls\"; to run a command named probe, put it after --: "
          "dsh-confine [OPTIONS] -- probe [ARG...]");
    CHECK(error_of({"self-test", "--", "x"}) == "self-test takes no command after --; Try 'dsh-confine self-test --help'");
}

TEST_CASE("mode and runner texts list the valid values", "[cli]") {
    CHECK(usage_text(UsageText::UnknownMode, "x") ==
          "unknown mode \"x\" (read-only, workspace-write or danger-full-access)");
    CHECK(usage_text(UsageText::UnknownRunner, "bubblewrap") ==
          "unknown runner \"bubblewrap\" (auto, bwrap, landlock, seatbelt, windows-acl or custom)");
}

TEST_CASE("help and version", "[cli]") {
    Request r;
    REQUIRE(parse({"--help"}, r));
    CHECK(r.action == Action::Help);
    // Every option of the table is in the top help, with its value's name, unless hidden.
    for (const auto& o : option_names()) {
        if (o.name == "--help" || o.name == "--version" || o.name == "--attempt" || o.name == "--json" || o.name == "--context" || o.name == "--platform" ||
            o.name == "--write" || o.name == "--read" || o.name == "--binary")
            continue;  // a subcommand's own, or hidden
        INFO(o.name);
        const size_t at = r.text.find("  " + std::string(o.name));
        REQUIRE(at != std::string::npos);
        const char next = r.text[at + 2 + o.name.size()];
        CHECK(next == ' ');
        CHECK((r.text[at + 3 + o.name.size()] != ' ') == o.takes_value);
    }
    CHECK(r.text.find("--attempt") == std::string::npos);
    Request v;
    REQUIRE(parse({"--version"}, v));
    CHECK(v.action == Action::Version);
    CHECK(v.text.rfind("dsh-confine ", 0) == 0);

    Request e;
    REQUIRE(parse({"explain", "--help"}, e));
    CHECK(e.text.find("-- COMMAND") != std::string::npos);
    CHECK(e.text.find("--context") != std::string::npos);
    Request t;
    REQUIRE(parse({"self-test", "--help"}, t));
    CHECK(t.text.find("--runner RUNNER") != std::string::npos);
    CHECK(t.text.find("--binary PROGRAM") != std::string::npos);
    Request s;
    REQUIRE(parse({"session", "--help"}, s));
    CHECK(s.text.find("set-mode") != std::string::npos);
    // --help after the command is the command's.
    Request c;
    REQUIRE(parse({"true", "--help"}, c));
    CHECK(c.action == Action::Run);
}

TEST_CASE("no option of the table is read after the command, in any spelling", "[cli]") {
    for (const auto& o : option_names()) {
        const std::string name(o.name), joined = name + "=danger-full-access";
        for (const Words& tail : {Words{name}, Words{name, "danger-full-access"}, Words{joined}}) {
            for (const char* sub : {"", "explain"}) {
                std::vector<const char*> args;
                if (*sub) args.push_back(sub);
                args.push_back("cmd");
                for (const auto& w : tail) args.push_back(w.c_str());
                Request r;
                INFO(name << " after the command, " << (*sub ? sub : "run"));
                REQUIRE(parse(args, r));
                Words want{"cmd"};
                want.insert(want.end(), tail.begin(), tail.end());
                CHECK(r.argv == want);
                CHECK(r.action == (*sub ? Action::Explain : Action::Run));
                CHECK_FALSE(r.mode);
                CHECK_FALSE(r.runner);
                CHECK_FALSE(r.supervise);
                CHECK_FALSE(r.json);
                CHECK(r.writable.empty());
            }
        }
    }
}

TEST_CASE("values reach us as given: CLI11 neither splits, unpacks nor skips them", "[cli]") {
    // CLI11 unpacks "[a,b]" into two values for options that take several,
    // reads an empty --name= as "take the next word", and classifies a word
    // like "++" or a subcommand's name by itself; none of it may change what
    // we store.
    Request r;
    REQUIRE(parse({"--writable", "[/a,/b]", "--writable=/c,/d", "--setenv", "L=[x,y]", "--mode=", "--root", "probe",
                   "--justification", "-x", "--approver", "--bogus", "--unsetenv", "++", "true"},
                  r));
    CHECK(r.writable == Words{"[/a,/b]", "/c,/d"});
    CHECK(r.setenv == std::vector<std::pair<std::string, std::string>>{{"L", "[x,y]"}});
    CHECK(*r.mode == "");
    CHECK(*r.root == "probe");
    CHECK(*r.justification == "-x");
    CHECK(*r.approver == "--bogus");
    CHECK(r.unsetenv == Words{"++"});
    CHECK(r.action == Action::Run);
    CHECK(r.argv == Words{"true"});

    // session set-mode: FILE and MODE are any words, subcommand names included.
    for (const char* file : {"probe", "++", "-", "set-mode", "session", "[a,b]"}) {
        Request s;
        REQUIRE(parse({"session", "set-mode", file, "explain"}, s));
        CHECK(s.action == Action::SessionSetMode);
        CHECK(s.session_file == file);
        CHECK(s.session_mode == "explain");
    }
    CHECK(error_of({"session", "set-mode", "/log"}) ==
          "session set-mode takes a FILE and a MODE: dsh-confine session set-mode FILE MODE");

    // Flags take no value in any spelling CLI11 knows for flags.
    CHECK(error_of({"--supervise=true", "x"}) == "option --supervise takes no value: give it alone");
    CHECK(error_of({"--clearenv=0", "x"}) == "option --clearenv takes no value: give it alone");
    // Short options are whole words: no bundling.
    CHECK(error_of({"-hV"}) == "unknown option \"-hV\"; Try 'dsh-confine --help'");
    CHECK(error_of({"-Vh"}) == "unknown option \"-Vh\"; Try 'dsh-confine --help'");
}

TEST_CASE("the first problem in the order of the words is the one reported", "[cli]") {
    // Problems CLI11 finds (twice, a bad fd) and ones found before it (an
    // unknown option, a missing value) are reported in argv order.
    CHECK(error_of({"--mode", "a", "--mode", "b", "--bogus", "x"}) == "option --mode is given twice: give it once");
    CHECK(error_of({"--bogus", "--mode", "a", "--mode", "b", "x"}) ==
          "unknown option \"--bogus\"; Try 'dsh-confine --help'");
    CHECK(error_of({"--report-fd", "x", "--report-fd", "3", "y"}).rfind("option --report-fd", 0) == 0);
    CHECK(error_of({"--mode", "a", "probe", "--mode", "b"}) == "option --mode is given twice: give it once");
    CHECK(error_of({"--supervise", "--supervise", "--writable"}) == "option --supervise is given twice: give it once");
    // --help ends our words: what comes after it is not read, what comes before is.
    Request h;
    REQUIRE(parse({"--help", "--bogus", "--mode"}, h));
    CHECK(h.action == Action::Help);
    CHECK(error_of({"--mode", "a", "--mode", "b", "--help"}) == "option --mode is given twice: give it once");
}

TEST_CASE("--agent stands for workspace-write, --net off, --hide-secrets, --scrub-secrets", "[cli][presets]") {
    Request r;
    REQUIRE(parse({"--agent", "--", "true"}, r));
    CHECK(*r.mode == "workspace-write");
    CHECK(*r.net == "off");
    CHECK(r.hide_secrets);
    CHECK(r.scrub_secrets);
    // Narrower or the same wins.
    Request n;
    REQUIRE(parse({"--mode", "read-only", "--agent", "--net", "off", "--hide-secrets", "--", "true"}, n));
    CHECK(*n.mode == "read-only");
    CHECK(*n.net == "off");
    // Wider is an error naming both ways out.
    CHECK(error_of({"--agent", "--mode", "danger-full-access", "--", "true"}).find("--agent runs in workspace-write") !=
          std::string::npos);
    CHECK(error_of({"--net", "host", "--agent", "--", "true"}).find("--agent turns the network off") != std::string::npos);
    CHECK(error_of({"--agent", "--net", "allow=example.com", "--", "true"}).find("--net allow=example.com") !=
          std::string::npos);
}

TEST_CASE("--cache takes known tools, comma lists and repeats", "[cli][presets]") {
    Request r;
    REQUIRE(parse({"--cache", "npm,pip", "--cache", "go", "--cache", "npm", "--", "true"}, r));
    CHECK(r.cache == Words{"npm", "pip", "go"});
    CHECK(error_of({"--cache", "nmp", "--", "true"}).find("unknown tool 'nmp' (did you mean npm?)") != std::string::npos);
    CHECK(error_of({"--cache", "npm,,pip", "--", "true"}).find("unknown tool ''") != std::string::npos);
}
