// The Windows ACL restricted-token runner, the pure part: SID derivation, the
// helper's argv per mode, the helper's own argument validation, and Windows
// command-line quoting. Plain C++ with no Windows header, so the Linux unit
// tests and `explain --platform windows` build it too.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../confinement.hpp"

namespace dsh::acl {

// The helper dsh-confine runs on Windows, found next to dsh-confine.exe (never
// on PATH, which a workspace could shadow).
inline constexpr std::string_view HELPER_NAME = "dsh-confine-acl-run.exe";

// The grant ACE: allow, OBJECT_INHERIT|CONTAINER_INHERIT, this mask:
// SYNCHRONIZE | DELETE | FILE_WRITE_ATTRIBUTES | FILE_DELETE_CHILD |
// FILE_WRITE_EA | FILE_APPEND_DATA | FILE_WRITE_DATA.
inline constexpr uint32_t GRANT_MASK = 0x00110156;

// The exit status of the helper's own failures; the child's status otherwise.
inline constexpr int HELPER_FAILURE_EXIT = 127;

// The seed's derivation: sha256 over the UTF-8 bytes, a = u32le(digest[0..4]),
// b = u32le(digest[4..8]), SID "S-1-4-{a % (2^30-1) + 1}-{b % (2^30-1) + 1}".
// The workspace SID hashes the workspace path exactly as passed to the helper.
std::string workspace_sid(std::string_view workspace);
// The same over "temp\0" + dir, with "-1" appended.
std::string temp_sid(std::string_view temp_dir);

struct Sids {
    std::string write_sid;       // workspace_sid(workspace)
    std::string temp_write_sid;  // temp_sid(temp)
};

// The helper's argv (element 0 is the helper's path):
//   --workspace W --temp T --mode M [--write-sid S --temp-write-sid T'] -- command...
// The SIDs are passed only in workspace-write with a session (private temp dir).
std::vector<std::string> helper_argv(std::string_view helper, Mode mode, std::string_view workspace,
                                     std::string_view temp, const std::optional<Sids>& sids,
                                     const std::vector<std::string>& command);

// The functional probe (used only when a chain has several candidates):
//   helper --workspace <tmp> --temp <tmp> --mode read-only -- cmd /c exit 0
std::vector<std::string> probe_argv(std::string_view helper, std::string_view tmp);

// What the helper was asked to do, once its command line validates.
struct HelperArgs {
    std::string workspace;
    std::string temp;
    Mode mode = Mode::ReadOnly;
    std::optional<Sids> sids;
    std::vector<std::string> command;
};

// Validates the helper's arguments (argv without element 0). On failure,
// `error` holds the full stderr line without the newline:
// "windows-acl-run: <detail>" (the helper then exits 127).
// `is_dir` answers whether a path is an existing directory.
struct HelperParse {
    std::optional<HelperArgs> args;
    std::string error;
};
HelperParse parse_helper_args(const std::vector<std::string>& args,
                              const std::function<bool(const std::string&)>& is_dir);

// Whether `path` is `parent` or below it, as Windows compares paths: '/' and
// '\' alike, ASCII case-insensitive, trailing separators ignored.
bool windows_path_within(std::string_view path, std::string_view parent);

// One argument quoted so CommandLineToArgvW (and the MSVC CRT) reads it back
// unchanged: quotes only when needed; backslashes doubled only before a quote.
std::string quote_windows_arg(std::string_view arg);
// The lpCommandLine for CreateProcess: quoted arguments joined by spaces.
std::string windows_command_line(const std::vector<std::string>& argv);

// The runner's layer: partial, with the gaps the seed names.
Layer layer();
std::vector<std::string> denial_signatures();
nlohmann::json runner_failure_rules();

// Human-readable plan for `explain --platform windows`. `temp` is the temp
// directory Windows would report (GetTempPath); `session` says whether the
// call has a session (workspace-write then uses a private temp dir + SIDs).
std::string render_windows_plan(const Policy& policy, const std::vector<std::string>& command,
                                std::string_view temp, bool session);

}  // namespace dsh::acl
