#include <catch2/catch.hpp>

#include <climits>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/policy.hpp"

using namespace dsh;

namespace {
// A scratch tree under /var/tmp: real directories and symlinks for realpath.
struct Tree {
    std::string base;
    Tree() {
        char tmpl[] = "/var/tmp/dsh-unit-XXXXXX";
        base = ::mkdtemp(tmpl);
        ::mkdir((base + "/real").c_str(), 0755);
        ::mkdir((base + "/real/sub").c_str(), 0755);
        ::mkdir((base + "/other").c_str(), 0755);
        REQUIRE(::symlink("real/sub", (base + "/link").c_str()) == 0);
    }
    ~Tree() { (void)!std::system(("rm -rf '" + base + "'").c_str()); }
};
}  // namespace

TEST_CASE("modes parse, print and order as the seed's ladder") {
    CHECK(parse_mode("read-only") == Mode::ReadOnly);
    CHECK(parse_mode("workspace-write") == Mode::WorkspaceWrite);
    CHECK(parse_mode("danger-full-access") == Mode::DangerFullAccess);
    CHECK_FALSE(parse_mode("Read-Only"));
    CHECK_FALSE(parse_mode(""));
    CHECK(to_string(Mode::WorkspaceWrite) == "workspace-write");
    CHECK(is_strictly_wider(Mode::WorkspaceWrite, Mode::ReadOnly));
    CHECK(is_strictly_wider(Mode::DangerFullAccess, Mode::ReadOnly));
    CHECK(is_strictly_wider(Mode::DangerFullAccess, Mode::WorkspaceWrite));
    CHECK_FALSE(is_strictly_wider(Mode::ReadOnly, Mode::ReadOnly));
    CHECK_FALSE(is_strictly_wider(Mode::ReadOnly, Mode::WorkspaceWrite));
    CHECK_FALSE(is_strictly_wider(Mode::WorkspaceWrite, Mode::DangerFullAccess));
}

TEST_CASE("lexical normalisation") {
    CHECK(lexically_normal("/") == "/");
    CHECK(lexically_normal("//a//b/") == "/a/b");
    CHECK(lexically_normal("/a/./b/../c") == "/a/c");
    CHECK(lexically_normal("/..") == "/");
    CHECK(lexically_normal("/a/../../b") == "/b");
    CHECK(lexically_normal("/ws/../ws/./sub") == "/ws/sub");
}

TEST_CASE("canonical paths: realpath first, then lexical") {
    Tree t;
    SECTION("symlinked root resolves to its target") {
        CHECK(canonical_path(t.base + "/link", "/") == t.base + "/real/sub");
    }
    SECTION("link/.. resolves like chdir: the parent of the target") {
        CHECK(canonical_path(t.base + "/link/..", "/") == t.base + "/real");
    }
    SECTION("trailing slashes and dots") {
        CHECK(canonical_path(t.base + "/real/./sub/", "/") == t.base + "/real/sub");
    }
    SECTION("relative paths are taken against cwd") {
        CHECK(canonical_path("real/sub", t.base) == t.base + "/real/sub");
        CHECK(canonical_path(".", t.base + "/real") == t.base + "/real");
    }
    SECTION("a missing tail keeps the resolved ancestor") {
        CHECK(canonical_path(t.base + "/link/new/./x/../y", "/") == t.base + "/real/sub/new/y");
        CHECK(canonical_path("/nonexistent-dsh/../a", "/") == "/a");
    }
}

TEST_CASE("build_policy: roots per mode, canonical and deduplicated") {
    Tree t;
    PolicyInput in;
    in.cwd = t.base;
    SECTION("read-only: only /dev/null") {
        Policy p;
        REQUIRE(build_policy(in, p));
        CHECK(p.mode == Mode::ReadOnly);
        CHECK(p.writable_roots.empty());
        CHECK(p.writable_files == std::vector<std::string>{"/dev/null", "/dev/tty"});
        CHECK(p.workspace_root == t.base);
        CHECK(to_string(p.root_source) == "cwd");
    }
    SECTION("danger-full-access: no roots at all") {
        in.mode = Mode::DangerFullAccess;
        Policy p;
        REQUIRE(build_policy(in, p));
        CHECK(p.writable_roots.empty());
        CHECK(p.writable_files.empty());
    }
    SECTION("workspace-write: root, /tmp, $TMPDIR, extras; first occurrence wins") {
        in.mode = Mode::WorkspaceWrite;
        in.root = t.base + "/real/./sub/";
        in.root_source = RootSource::Flag;
        in.tmpdir = "/tmp/";
        in.writable = {t.base + "/other", t.base + "/real/sub", t.base + "/other/"};
        Policy p;
        REQUIRE(build_policy(in, p));
        REQUIRE(p.writable_roots.size() == 3);
        CHECK(p.writable_roots[0].path == t.base + "/real/sub");
        CHECK(p.writable_roots[0].source == Grant::Workspace);
        CHECK(p.writable_roots[1].path == "/tmp");
        CHECK(p.writable_roots[2].path == t.base + "/other");
        CHECK(p.writable_roots[2].source == Grant::Flag);
        CHECK(to_string(p.root_source) == "flag");
    }
    SECTION("workspace-write: the host's /tmp is a root opened like any other, and persists") {
        in.mode = Mode::WorkspaceWrite;
        Policy p;
        REQUIRE(build_policy(in, p));
        REQUIRE(p.writable_roots.size() == 2);
        CHECK(p.writable_roots[1].path == "/tmp");
        CHECK(p.writable_roots[1].source == Grant::Tmp);
        CHECK(p.writable_roots[1].persists);
        CHECK(p.writable_roots[1].fd >= 0);
        CHECK_FALSE(p.private_tmp);
    }
    SECTION("--private-tmp: /tmp is a root that does not persist, and nothing of the host's is opened") {
        in.mode = Mode::WorkspaceWrite;
        in.private_tmp = true;
        in.tmpdir = "/tmp";
        Policy p;
        REQUIRE(build_policy(in, p));
        REQUIRE(p.writable_roots.size() == 2);
        CHECK(p.private_tmp);
        CHECK(p.writable_roots[1].path == "/tmp");
        CHECK_FALSE(p.writable_roots[1].persists);
        CHECK(p.writable_roots[1].fd == -1);
        // A write meant to last there would be discarded: refused.
        in.writable = {"/tmp"};
        Policy q;
        auto o = build_policy(in, q);
        CHECK(o.err == Err::InvalidPath);
        CHECK(o.message == "writable path /tmp is the private /tmp of --private-tmp, whose writes are discarded at "
                           "exit; drop one of the two");
        in.writable.clear();
        in.root = "/tmp";
        Policy r;
        o = build_policy(in, r);
        CHECK(o.err == Err::InvalidRoot);
        CHECK(o.message == "workspace root /tmp cannot be kept with --private-tmp, which puts an empty /tmp over it; "
                           "choose another --root or drop --private-tmp");
    }
    SECTION("--private-tmp in read-only: no root, the policy says private; danger-full-access: not applied") {
        in.private_tmp = true;
        Policy p;
        REQUIRE(build_policy(in, p));
        CHECK(p.writable_roots.empty());
        CHECK(p.private_tmp);
        CHECK_FALSE(write_allowed(p, "/tmp/x", "/"));
        in.mode = Mode::DangerFullAccess;
        Policy d;
        REQUIRE(build_policy(in, d));
        CHECK_FALSE(d.private_tmp);
    }
    SECTION("each root is granted as the descriptor opened while resolving it") {
        in.mode = Mode::WorkspaceWrite;
        in.root = t.base + "/real/sub";
        Policy p;
        REQUIRE(build_policy(in, p));
        struct stat st {}, fst {};
        REQUIRE(::stat((t.base + "/real/sub").c_str(), &st) == 0);
        REQUIRE(p.writable_roots[0].fd >= 0);
        REQUIRE(::fstat(p.writable_roots[0].fd, &fst) == 0);
        CHECK(fst.st_ino == st.st_ino);
        CHECK(p.writable_roots[0].ino == st.st_ino);
        CHECK((::fcntl(p.writable_roots[0].fd, F_GETFD) & FD_CLOEXEC) != 0);
    }
    SECTION("a symlink in a directory the caller can write is never followed into a root") {
        in.mode = Mode::WorkspaceWrite;
        in.root = t.base + "/link";
        Policy p;
        auto o = build_policy(in, p);
        CHECK(o.err == Err::InvalidRoot);
        CHECK(o.message == "workspace root " + t.base + "/link passes through the symlink " + t.base +
                               "/link, in a directory the caller can write (an earlier confined run could have "
                               "planted it); give the path it points to instead");
        in.root = t.base + "/real/sub";
        in.writable = {t.base + "/link/.."};
        CHECK(build_policy(in, p).err == Err::InvalidPath);
        in.writable = {};
        // An implicit root through such a link is not granted, and says why.
        in.tmpdir = t.base + "/link";
        REQUIRE(build_policy(in, p));
        CHECK(p.writable_roots.size() == 2);
        REQUIRE(p.not_granted.size() == 1);
        CHECK(p.not_granted[0].path == t.base + "/link");
        CHECK(p.not_granted[0].reason.rfind("not granted: it passes through the symlink", 0) == 0);
    }
    SECTION("a symlink the caller cannot write is followed (system links such as /lib)") {
        struct stat st {};
        if (::getuid() != 0 && ::lstat("/lib", &st) == 0 && S_ISLNK(st.st_mode)) {
            in.mode = Mode::WorkspaceWrite;
            in.root = t.base + "/real";
            in.writable = {"/lib"};
            Policy p;
            auto o = build_policy(in, p);
            REQUIRE(o);
            char real[PATH_MAX];
            REQUIRE(::realpath("/lib", real) != nullptr);
            CHECK(p.writable_roots.back().path == real);
        }
    }
    SECTION("kernel interfaces are never roots, whatever the source") {
        in.mode = Mode::WorkspaceWrite;
        Policy p;
        for (const char* bad : {"/proc/sys", "/proc", "/sys/kernel", "/dev/shm", "/dev", "/sys/fs/cgroup"}) {
            struct stat st {};
            if (::stat(bad, &st) != 0) continue;
            in.root = bad;
            auto o = build_policy(in, p);
            CHECK(o.err == Err::InvalidRoot);
            CHECK(o.message.find(" cannot be granted: ") != std::string::npos);
            in.root = t.base + "/real";
            in.writable = {bad};
            CHECK(build_policy(in, p).err == Err::InvalidPath);
            in.writable = {};
            in.tmpdir = bad;
            REQUIRE(build_policy(in, p));
            CHECK(p.writable_roots.size() == 2);
            REQUIRE(p.not_granted.size() == 1);
            in.tmpdir.reset();
        }
        in.root = t.base + "/real";
        in.tmpdir = "/";
        REQUIRE(build_policy(in, p));
        CHECK(p.writable_roots.size() == 2);
        REQUIRE(p.not_granted.size() == 1);
        CHECK(p.not_granted[0].reason == "not granted: it is / (that would make every path writable)");
    }
    SECTION("a failed getcwd is an error, never /") {
        in.mode = Mode::ReadOnly;
        in.cwd = "";
        in.root = "etc";
        Policy p;
        auto o = build_policy(in, p);
        CHECK(o.err == Err::InvalidRoot);
        CHECK(o.message == "the current directory cannot be determined (deleted, or deeper than the system "
                           "allows); change to an existing directory and run again");
    }
    SECTION("a relative $TMPDIR is ignored") {
        in.mode = Mode::WorkspaceWrite;
        in.tmpdir = "relative/tmp";
        Policy p;
        REQUIRE(build_policy(in, p));
        CHECK(p.writable_roots.size() == 2);
    }
    SECTION("bad roots are clear errors in workspace-write") {
        in.mode = Mode::WorkspaceWrite;
        Policy p;
        in.root = t.base + "/missing";
        auto o = build_policy(in, p);
        CHECK_FALSE(o);
        CHECK(o.err == Err::InvalidRoot);
        CHECK(o.message == "workspace root " + t.base + "/missing does not exist; create it first (mkdir -p " + t.base +
                           "/missing) or name an existing directory");
        REQUIRE(::close(::creat((t.base + "/file").c_str(), 0644)) == 0);
        in.root = t.base + "/file";
        o = build_policy(in, p);
        CHECK(o.message == "workspace root " + t.base + "/file is not a directory; name a directory");
        in.root = "/";
        CHECK(build_policy(in, p).err == Err::InvalidRoot);
        in.root = t.base;
        in.writable = {"/"};
        CHECK(build_policy(in, p).err == Err::InvalidPath);
        in.writable = {t.base + "/nope"};
        CHECK(build_policy(in, p).err == Err::InvalidPath);
    }
    SECTION("a missing root is fine in read-only (nothing is granted there)") {
        in.root = t.base + "/missing";
        Policy p;
        CHECK(build_policy(in, p));
    }
}

TEST_CASE("write_allowed agrees with the roots") {
    Tree t;
    PolicyInput in;
    in.cwd = t.base;
    in.mode = Mode::WorkspaceWrite;
    in.root = t.base + "/real";
    Policy p;
    REQUIRE(build_policy(in, p));
    CHECK(write_allowed(p, t.base + "/real/x", "/"));
    CHECK(write_allowed(p, "real/sub/new/file", t.base));
    CHECK(write_allowed(p, t.base + "/link/f", "/"));  // symlink into the root
    CHECK_FALSE(write_allowed(p, t.base + "/other/x", "/"));
    CHECK_FALSE(write_allowed(p, t.base + "/real/../other/x", "/"));
    CHECK_FALSE(write_allowed(p, t.base + "/realx", "/"));  // prefix, not a child
    CHECK(write_allowed(p, "/dev/null", "/"));
    CHECK_FALSE(write_allowed(p, "/dev/zero", "/"));
    CHECK(write_allowed(p, "/tmp/a", "/"));
    in.mode = Mode::ReadOnly;
    REQUIRE(build_policy(in, p));
    CHECK_FALSE(write_allowed(p, t.base + "/real/x", "/"));
    CHECK(write_allowed(p, "/dev/null", "/"));
}
