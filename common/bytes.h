// POSIX strings are bytes. Arguments, environment, paths, job names, rank
// output and a rank's error text may hold any byte but NUL, UTF-8 or not;
// ltd keeps them as they came and turns them into text only at an edge:
// for a person (escaped, so a terminal is never driven by a job's bytes),
// for protobuf `string` fields and JSON (valid UTF-8), or for a record on
// disk (lossless).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ltd {

// RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
bool IsValidUtf8(std::string_view bytes);

// What DisplayEscape does with control characters (C0, DEL and C1), which
// are valid UTF-8 but move a terminal's cursor or change its state.
enum class Controls {
  kKeep,          // as they are: text for protobuf strings and JSON
  kEscape,        // all but tab escaped (`\n`, `\r`, `\x1b`): one line on a terminal
  kKeepNewlines,  // all but tab and newline escaped: several lines (a stack)
};

// Valid UTF-8 as it is; each byte of an invalid sequence as `\xNN`
// (uppercase hex); controls as `controls` says (C1 as `\u0085`). Never
// drops a byte, and the result is always valid UTF-8.
std::string DisplayEscape(std::string_view bytes, Controls controls = Controls::kKeep);

// DisplayEscape of the longest prefix of `bytes` whose text fits in
// `limit` bytes; `*consumed`: that prefix's length.
std::string DisplayEscapePrefix(std::string_view bytes, size_t limit, size_t* consumed,
                                Controls controls = Controls::kKeep);

// DisplayEscape, cut between characters after at most `limit` bytes of
// text; a cut text ends in "… [+N bytes]", N the bytes of `bytes` left out.
std::string DisplayEscapeElided(std::string_view bytes, size_t limit,
                                Controls controls = Controls::kKeep);

// What ltd's own log may show of a user's bytes: one line (no forged log
// lines), bounded, escaped.
inline std::string ForLog(std::string_view bytes) {
  return DisplayEscapeElided(bytes, 512, Controls::kEscape);
}

// The mark DisplayEscapeElided ends a cut text with.
std::string ElisionMark(size_t omitted_bytes);

// The first bytes of `bytes`, at most `max`, never ending inside a UTF-8
// sequence (where more than a sequence's continuation bytes follow, which
// is no UTF-8, it ends at `max`).
std::string_view CutAtCharacter(std::string_view bytes, size_t max);

// At most `max` bytes of `bytes`, kept as bytes (nothing escaped): all of
// them when they fit, else their first bytes up to the start of a
// character (never inside a UTF-8 sequence) and the ElisionMark of the
// rest. `max` leaves room for the mark (at least 32).
std::string CutElided(std::string_view bytes, size_t max);

// Bytes in a JSON record, losslessly: a string when they are valid UTF-8
// (records stay readable), else {"base64": "..."}.
nlohmann::json BytesToJson(std::string_view bytes);
// Either form; nullopt for anything else (a number, bad base64).
std::optional<std::string> BytesFromJson(const nlohmann::json& j);

}  // namespace ltd
