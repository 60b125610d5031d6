#include <catch2/catch.hpp>

#include "environment.hpp"
#include "report.hpp"

using namespace dsh;
using V = std::vector<std::string>;

namespace {
V build(const EnvRequest& r, const V& cur, EnvChanges& ch) {
    V out;
    auto o = build_environment(r, cur, out, ch);
    REQUIRE(o);
    return out;
}
}  // namespace

TEST_CASE("no flag asks for nothing") {
    EnvRequest r;
    CHECK_FALSE(r.any());
    r.unset = {"X"};
    CHECK(r.any());
}

TEST_CASE("secret names, case-insensitive, by whole words") {
    for (const char* n : {"GITHUB_TOKEN", "github_token", "NPM_TOKEN", "NPM_CONFIG__AUTHTOKEN", "MY_SECRET",
                          "client_secret_file", "OPENAI_API_KEY", "ApiKey", "PGPASSWORD", "MYSQL_PWD", "MYSQL_PWD_PASSWD",
                          "BORG_PASSPHRASE", "GOOGLE_APPLICATION_CREDENTIALS", "DOCKER_CREDENTIALS", "SESSION_COOKIE",
                          "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_CLIENT_SECRET",
                          "STRIPE_SECRET_KEY", "SSH_PRIVATE_KEY", "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", "SSH_AUTH_SOCK",
                          "krb5ccname", "DOCKER_AUTH_CONFIG", "CLIENT_CERT_PASSWORD", "VAULT_TOKEN", "HF_TOKEN"})
        CHECK(looks_like_secret(n));
    for (const char* n : {"PATH", "HOME", "TMPDIR", "LANG", "TERM", "USER", "SHELL", "PWD", "OLDPWD",
                          "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "XAUTHORITY", "SSH_CONNECTION", "DATABASE_URL",
                          "EDITOR", "LD_LIBRARY_PATH", "", "KEYBOARD", "MONKEY", "XKB_DEFAULT_KEYMAP", "SORT_KEY",
                          "PRIMARY_KEY", "AWS_REGION", "AWS_PROFILE", "AZURE_CLIENT_ID", "AWS_CA_BUNDLE",
                          "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE_X_CERT", "NODE_EXTRA_CA_CERTS",
                          "GIT_SSL_CAINFO", "TOKENIZERS_PARALLELISM", "PASSWORDLESS", "_"})
        CHECK_FALSE(looks_like_secret(n));
}

TEST_CASE("credentials inside a URL value") {
    for (const char* v : {"postgres://u:p@h/db", "https://x-access-token:ghp_abc@github.com/o/r.git",
                          "https://pypi.org/simple https://me:pw@mirror.example/simple", "redis://:pass@host:6379"})
        CHECK(value_carries_credentials(v));
    for (const char* v : {"postgres://h/db", "ssh://git@github.com/o/r", "https://user@host/x", "https://h/p?a=b:c@d",
                          "user:pass@host", "https://h:8080/", "", "mailto:a@b"})
        CHECK_FALSE(value_carries_credentials(v));
}

TEST_CASE("clearenv starts empty; setenv fills it") {
    EnvRequest r;
    r.clear = true;
    r.set = {{"PATH", "/bin"}, {"A", "x=y"}};
    EnvChanges ch;
    auto out = build(r, {"HOME=/root", "PATH=/usr/bin"}, ch);
    CHECK(out == V{"PATH=/bin", "A=x=y"});
    CHECK(ch.cleared);
    CHECK(ch.set == V{"PATH", "A"});
    CHECK(ch.unset.empty());
    CHECK(ch.scrubbed.empty());
}

TEST_CASE("clearenv alone gives an empty environment") {
    EnvRequest r;
    r.clear = true;
    EnvChanges ch;
    CHECK(build(r, {"A=1"}, ch).empty());
}

TEST_CASE("unsetenv removes present names and reports only those") {
    EnvRequest r;
    r.unset = {"B", "NOPE"};
    EnvChanges ch;
    auto out = build(r, {"A=1", "B=2", "C=3", "B=dup"}, ch);
    CHECK(out == V{"A=1", "C=3"});
    CHECK(ch.unset == V{"B"});
}

TEST_CASE("setenv replaces in place, removes duplicates, last one wins") {
    EnvRequest r;
    r.set = {{"B", "new"}, {"D", "4"}, {"B", "newer"}};
    EnvChanges ch;
    auto out = build(r, {"A=1", "B=2", "C=3", "B=dup"}, ch);
    CHECK(out == V{"A=1", "B=newer", "C=3", "D=4"});
    CHECK(ch.set == V{"B", "D"});
}

TEST_CASE("scrub drops secrets, keeps the rest in order; setenv puts one back") {
    EnvRequest r;
    r.scrub_secrets = true;
    r.set = {{"GITHUB_TOKEN", "given"}};
    EnvChanges ch;
    auto out = build(r, {"PATH=/bin", "GITHUB_TOKEN=abc", "AWS_SECRET_ACCESS_KEY=s", "HOME=/h", "aws_x=1",
                         "DATABASE_URL=postgres://u:p@h/db", "AWS_CA_BUNDLE=/etc/ca.pem"}, ch);
    CHECK(out == V{"PATH=/bin", "HOME=/h", "aws_x=1", "AWS_CA_BUNDLE=/etc/ca.pem", "GITHUB_TOKEN=given"});
    CHECK(ch.scrubbed == V{"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DATABASE_URL"});
    CHECK(ch.set == V{"GITHUB_TOKEN"});
}

TEST_CASE("unsetenv is exact and case-sensitive (unlike scrubbing)") {
    EnvRequest r;
    r.unset = {"path"};
    EnvChanges ch;
    CHECK(build(r, {"PATH=/bin"}, ch) == V{"PATH=/bin"});
}

TEST_CASE("entries without '=' survive unless cleared") {
    EnvRequest r;
    r.unset = {"X"};
    EnvChanges ch;
    CHECK(build(r, {"ODD", "X=1"}, ch) == V{"ODD"});
}

TEST_CASE("bad names are usage errors") {
    V out;
    EnvChanges ch;
    EnvRequest r;
    r.set = {{"", "v"}};
    auto o = build_environment(r, {}, out, ch);
    CHECK_FALSE(o);
    CHECK(o.code() == "USAGE");
    CHECK(o.message == "--setenv: the variable name is empty");
    r.set = {{"A=B", "v"}};
    o = build_environment(r, {}, out, ch);
    CHECK(o.message == "--setenv A=B: a variable name cannot contain '='");
    r.set.clear();
    r.unset = {"X=1"};
    o = build_environment(r, {}, out, ch);
    CHECK(o.message == "--unsetenv X=1: a variable name cannot contain '='");
    CHECK(o.exit_status() == 125);
}

TEST_CASE("env_lookup") {
    V env{"PATHX=1", "PATH", "PATH=/a:/b", "E="};
    CHECK(std::string(env_lookup(env, "PATH")) == "/a:/b");
    CHECK(std::string(env_lookup(env, "E")) == "");
    CHECK(env_lookup(env, "NOPE") == nullptr);
}

TEST_CASE("the confinement record names changes, never values") {
    Confinement c;
    c.environment.cleared = false;
    c.environment.set = {"A"};
    c.environment.scrubbed = {"GITHUB_TOKEN"};
    auto j = confinement_record(c);
    CHECK(j["environment"].dump() ==
          R"({"cleared":false,"set":["A"],"unset":[],"scrubbed":["GITHUB_TOKEN"]})");
    Confinement none;
    CHECK(confinement_record(none)["environment"].dump() ==
          R"({"cleared":false,"set":[],"unset":[],"scrubbed":[]})");
}

TEST_CASE("MAKEFLAGS: the jobserver make names, and nothing else", "[jobserver]") {
    using A = Jobserver::Auth;
    auto j = parse_jobserver("s -j4 --jobserver-auth=3,4");
    CHECK((j.auth == A::Fds && j.read_fd == 3 && j.write_fd == 4));
    j = parse_jobserver(" -j2 --jobserver-fds=7,8");  // make before 4.2
    CHECK((j.auth == A::Fds && j.read_fd == 7 && j.write_fd == 8));
    // The last one counts, as in make.
    j = parse_jobserver("-j --jobserver-auth=3,4 --jobserver-auth=5,6");
    CHECK((j.read_fd == 5 && j.write_fd == 6));
    CHECK(parse_jobserver("-j4 --jobserver-auth=fifo:/tmp/GMfifo1").auth == A::Fifo);
    // After "--" come variable assignments, whose values anyone writes.
    CHECK(parse_jobserver("s -- X=--jobserver-auth=3,4").auth == A::None);
    CHECK(parse_jobserver("s -- RUN=a\\ --jobserver-auth=3,4").auth == A::None);
    // An escaped blank stays inside its word.
    CHECK(parse_jobserver("s FOO\\ --jobserver-auth=3,4").auth == A::None);
    for (const char* bad : {"", "-j4", "--jobserver-auth=", "--jobserver-auth=3", "--jobserver-auth=3,3",
                            "--jobserver-auth=-1,4", "--jobserver-auth=3,x", "--jobserver-auth=3,4,5",
                            "--jobserver-auth=9999999999,4", "--jobserver-auth=fifo:", "--jobserver-auth= 3,4"})
        CHECK(parse_jobserver(bad).auth == A::None);
}
