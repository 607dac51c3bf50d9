#include "config_file.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "bytes.h"
#include "file_io.h"
#include "nearest_word.h"

namespace ltd {
namespace {

// A key or value as a message quotes it: one line, bounded, whatever the
// file holds.
std::string Quote(std::string_view text) {
  return DisplayEscapeElided(text, 64, Controls::kEscape);
}

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

size_t SkipSpace(const std::string& s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return i;
}

// What may follow a value: spaces, then nothing or a comment.
bool OnlyCommentFrom(const std::string& s, size_t i) {
  i = SkipSpace(s, i);
  return i == s.size() || s[i] == '#';
}

// A basic string's body from just after its opening quote; `end` gets the
// index just past the closing quote. Escapes as TOML has them, bar \u.
absl::StatusOr<std::string> BasicString(const std::string& s, size_t i, size_t* end) {
  std::string out;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      *end = i + 1;
      return out;
    }
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == s.size()) break;
    switch (s[i]) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("unknown escape \\", Quote(s.substr(i, 1))));
    }
  }
  return absl::InvalidArgumentError("a string with no closing quote");
}

absl::StatusOr<std::string> Value(const std::string& s, size_t i) {
  if (i == s.size() || s[i] == '#') return absl::InvalidArgumentError("no value after '='");
  size_t end = 0;
  std::string value;
  if (s[i] == '"') {
    auto body = BasicString(s, i + 1, &end);
    if (!body.ok()) return body.status();
    value = *std::move(body);
  } else if (s[i] == '\'') {
    end = s.find('\'', i + 1);
    if (end == std::string::npos)
      return absl::InvalidArgumentError("a string with no closing quote");
    value = s.substr(i + 1, end - i - 1);
    ++end;
  } else {
    // A bare value: an integer or a boolean (TOML has no bare strings).
    end = i;
    while (end < s.size() && s[end] != ' ' && s[end] != '\t' && s[end] != '#') ++end;
    value = s.substr(i, end - i);
    const bool number = value.find_first_not_of("0123456789+-_") == std::string::npos;
    if (!number && value != "true" && value != "false") {
      return absl::InvalidArgumentError(
          absl::StrCat("value '", Quote(value), "' is neither a number nor true/false; quote a string"));
    }
    value.erase(std::remove(value.begin(), value.end(), '_'), value.end());
  }
  if (!OnlyCommentFrom(s, end)) return absl::InvalidArgumentError("text after the value");
  return value;
}

}  // namespace

absl::StatusOr<std::vector<ConfigEntry>> ParseConfig(const std::string& text,
                                                     const std::string& path) {
  std::vector<ConfigEntry> entries;
  std::set<std::string> seen;
  int number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(start, nl - start);
    start = nl + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto fail = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": ", what));
    };
    size_t i = SkipSpace(line, 0);
    if (i == line.size() || line[i] == '#') continue;
    if (line[i] == '[')
      return fail("ltd's configuration has no sections; put every key at the top level");
    size_t key_end = i;
    while (key_end < line.size() && IsKeyChar(line[key_end])) ++key_end;
    if (key_end == i) return fail("expected `key = value`");
    std::string key = line.substr(i, key_end - i);
    i = SkipSpace(line, key_end);
    if (i == line.size() || line[i] != '=')
      return fail(absl::StrCat("expected '=' after '", Quote(key), "'"));
    auto value = Value(line, SkipSpace(line, i + 1));
    if (!value.ok()) return fail(absl::StrCat(Quote(key), ": ", value.status().message()));
    if (!seen.insert(key).second) return fail(absl::StrCat("'", Quote(key), "' is given twice"));
    entries.push_back({std::move(key), *std::move(value), number});
  }
  return entries;
}

absl::StatusOr<std::vector<ConfigEntry>> ReadConfigFile(const std::string& path) {
  auto text = ReadWholeFile(path, 1 << 20);
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path);
}

std::string NearestKey(const std::string& key, const std::vector<std::string>& known) {
  return NearestWord(key, known);
}

}  // namespace ltd
