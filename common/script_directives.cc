#include "script_directives.h"

#include "str_util.h"

namespace ltd {
namespace {

constexpr std::string_view kPrefix = "#LTD";

bool Blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

}  // namespace

absl::StatusOr<std::vector<ScriptDirective>> ParseScriptDirectives(std::string_view text,
                                                                   std::string_view where) {
  std::vector<ScriptDirective> out;
  if (!text.starts_with("#!")) return out;
  text = text.substr(0, kMaxScriptHead);
  size_t tokens = 0;
  int number = 0;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    // A last line cut at the bound is not read: it may be cut mid-option.
    if (nl == std::string_view::npos) break;
    std::string_view line = text.substr(at, nl - at);
    at = nl + 1;
    ++number;
    if (number == 1) continue;  // the #! line
    size_t first = 0;
    while (first < line.size() && Blank(line[first])) ++first;
    if (first == line.size()) continue;        // blank
    if (line[first] != '#') break;             // the script's own first line
    if (!line.starts_with(kPrefix)) continue;  // a comment
    if (line.size() > kPrefix.size() && !Blank(line[kPrefix.size()])) continue;  // #LTDX
    ScriptDirective d;
    d.line = number;
    std::string_view rest = line.substr(kPrefix.size());
    for (size_t i = 0; i < rest.size();) {
      if (Blank(rest[i])) {
        ++i;
        continue;
      }
      if (rest[i] == '#') break;  // a comment after the options
      std::string token;
      while (i < rest.size() && !Blank(rest[i])) {
        const char c = rest[i];
        if (c != '\'' && c != '"') {
          token.push_back(c);
          ++i;
          continue;
        }
        const size_t close = rest.find(c, i + 1);
        if (close == std::string_view::npos) {
          return absl::InvalidArgumentError(Cat(where, ":", number, ": #LTD: a ", c,
                                                " is not closed; close it on the same line"));
        }
        token.append(rest.substr(i + 1, close - i - 1));
        i = close + 1;
      }
      if (token.find('\0') != std::string::npos) {
        return absl::InvalidArgumentError(
            Cat(where, ":", number, ": #LTD: a NUL byte; give options as text"));
      }
      if (++tokens > kMaxDirectiveTokens) {
        return absl::InvalidArgumentError(Cat(where, ":", number, ": more than ",
                                              kMaxDirectiveTokens,
                                              " #LTD words; give the rest on the command line"));
      }
      d.tokens.push_back(std::move(token));
    }
    if (!d.tokens.empty()) out.push_back(std::move(d));
  }
  return out;
}

}  // namespace ltd
