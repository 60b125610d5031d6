#include <catch2/catch.hpp>

#include "../../src/cli.hpp"

using namespace dsh;

namespace {
Outcome parse(std::vector<const char*> args, Request& r) {
    args.insert(args.begin(), "dsh-confine");
    return parse_cli(static_cast<int>(args.size()), args.data(), r);
}
}  // namespace

TEST_CASE("the command is everything after the first --, untouched") {
    Request r;
    REQUIRE(parse({"--mode", "workspace-write", "--root", "/w", "--writable", "/a", "--writable", "/b", "--",
                   "sh", "-c", "x --mode y", "--", "--help"},
                  r));
    CHECK(r.action == Action::Run);
    CHECK(*r.mode == "workspace-write");
    CHECK(*r.root == "/w");
    CHECK(r.writable == std::vector<std::string>{"/a", "/b"});
    CHECK(r.argv == std::vector<std::string>{"sh", "-c", "x --mode y", "--", "--help"});
}

TEST_CASE("a bare command without -- works when it has no dashes") {
    Request r;
    REQUIRE(parse({"--report-fd", "3", "true"}, r));
    CHECK(r.argv == std::vector<std::string>{"true"});
    CHECK(r.report_fd == 3);
}

TEST_CASE("usage errors") {
    Request r;
    CHECK(parse({}, r).err == Err::Usage);
    CHECK(parse({"--"}, Request{} = r).err == Err::Usage);
    Request a;
    CHECK(parse({"--bogus", "--", "true"}, a).err == Err::Usage);
    Request b;
    CHECK(parse({"--report-fd", "x", "--", "true"}, b).err == Err::Usage);
    Request c;
    CHECK(parse({"--keep-fd", "-4", "--", "true"}, c).err == Err::Usage);
    Request d;
    CHECK(parse({"ls", "--", "true"}, d).err == Err::Usage);
    Request e;
    CHECK(parse({"--probe-timeout", "0", "--", "true"}, e).err == Err::Usage);
}

TEST_CASE("help and version") {
    Request r;
    REQUIRE(parse({"--help"}, r));
    CHECK(r.action == Action::Help);
    CHECK(r.text.find("--mode") != std::string::npos);
    Request v;
    REQUIRE(parse({"--version"}, v));
    CHECK(v.action == Action::Version);
    CHECK(v.text.rfind("dsh-confine ", 0) == 0);
}
