// The one UTF-8 decoder and hex pair (bytes.hpp): the report's "<key>Bytes",
// the bwrap stage's argv from the record, escalation's blank justification.
#include <catch2/catch.hpp>

#include "bytes.hpp"

using namespace dsh;

TEST_CASE("bytes: strict UTF-8, code point by code point") {
    CHECK(is_utf8(""));
    CHECK(is_utf8("plain ascii"));
    CHECK(is_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
    CHECK_FALSE(is_utf8("a\xff" "b"));          // not a lead byte
    CHECK_FALSE(is_utf8("\xc3"));               // cut short
    CHECK_FALSE(is_utf8("\xc3(" ));             // bad continuation
    CHECK_FALSE(is_utf8("\xc0\xa0"));           // overlong space
    CHECK_FALSE(is_utf8("\xed\xa0\x80"));       // a surrogate
    CHECK_FALSE(is_utf8("\xf4\x90\x80\x80"));   // past U+10FFFF
    std::string_view s = "\xe2\x80\x83x";       // EM SPACE, then x
    size_t i = 0;
    uint32_t cp = 0;
    REQUIRE(next_code_point(s, i, cp));
    CHECK(cp == 0x2003);
    CHECK(i == 3);
    size_t j = 0;
    std::string_view bad = "\xc0\xa0";
    CHECK_FALSE(next_code_point(bad, j, cp));
    CHECK(j == 0);
}

TEST_CASE("bytes: hex both ways, exactly") {
    const std::string all = [] {
        std::string s;
        for (int c = 0; c < 256; ++c) s += static_cast<char>(c);
        return s;
    }();
    CHECK(to_hex("a\xff") == "61ff");
    CHECK(from_hex(to_hex(all)) == all);
    CHECK(from_hex("") == std::string());
    CHECK_FALSE(from_hex("6"));    // odd length
    CHECK_FALSE(from_hex("6G"));   // not hex
    CHECK_FALSE(from_hex("6A"));   // upper case is not what the records write
}

TEST_CASE("nearest_word: one clear near miss, or nothing", "[bytes]") {
    static constexpr std::string_view kWords[] = {"read-only", "workspace-write", "danger-full-access", "root", "net"};
    auto near = [](std::string_view w) { return std::string(dsh::nearest_word(w, kWords, std::size(kWords))); };
    CHECK(near("read-onyl") == "read-only");          // two neighbours swapped: one step
    CHECK(near("workspace-wrte") == "workspace-write");
    CHECK(near("workspce-wirte") == "workspace-write"); // two steps
    CHECK(near("workspace") == "");                    // six away
    CHECK(near("read-only") == "");                    // not a miss
    CHECK(near("ne") == "net");
    CHECK(near("no") == "");                           // as far from "net" as it is long: a guess
    CHECK(near("rot") == "root");
    CHECK(near("nt") == "net");
    static constexpr std::string_view kTwins[] = {"--keep-fd", "--keep-fds"};
    CHECK(dsh::nearest_word("--keep-fdx", kTwins, 2).empty());  // as near to both: no guess
}

TEST_CASE("passwd_home: the home of the first line whose name or uid matches", "[bytes]") {
    const std::string_view text =
        "root:x:0:0:root:/root:/bin/bash\n"
        "bin:x:2:2::/bin\n"          // no shell field: the home is still there
        "short:x:7\n"                // no home field
        "ann:x:1000:1000:Ann,,,:/home/ann:/bin/sh\n"
        "ann:x:1001:1001::/home/other:/bin/sh";  // a second "ann": the first counts
    CHECK(dsh::passwd_home(text, 0, "root") == "/root");
    CHECK(dsh::passwd_home(text, 2, "0") == "/root");
    CHECK(dsh::passwd_home(text, 0, "bin") == "/bin");
    CHECK(dsh::passwd_home(text, 0, "ann") == "/home/ann");
    CHECK(dsh::passwd_home(text, 2, "1001") == "/home/other");
    CHECK(dsh::passwd_home(text, 0, "short") == "");
    CHECK(dsh::passwd_home(text, 2, "7") == "");
    CHECK(dsh::passwd_home(text, 0, "an") == "");  // whole fields only
    CHECK(dsh::passwd_home(text, 2, "100") == "");
    CHECK(dsh::passwd_home("", 0, "root") == "");
}
