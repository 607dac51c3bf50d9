// The `#LTD` lines at the top of a job's script, read by `ltctl submit`
// (common/script_directives.h); the script's bytes are its author's, or
// whoever wrote the file. Invariants: no `#!` line, no directive; the
// directives' lines ascend from the second line of the script, hold at
// most kMaxDirectiveTokens words in all, and no word holds a NUL or a line
// break; the words, written again as `#LTD` lines (each quoted where it
// must be), read back the same; a refusal is one bounded line.
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "script_directives.h"

using namespace ltd;

namespace {

// A word as a #LTD line takes it back: blanks and '#' inside quotes, a
// quote inside the other kind.
std::string Quoted(const std::string& word) {
  if (word.empty()) return "''";
  std::string out;
  for (char c : word) {
    if (c == '\'') {
      out += "\"'\"";
    } else if (c == '"') {
      out += "'\"'";
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '#') {
      out += '\'';
      out += c;
      out += '\'';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto directives = ParseScriptDirectives(text, "job.sh");
  if (!directives.ok()) {
    fuzz::CheckRefusal(directives.status());
    return 0;
  }
  if (!text.starts_with("#!")) FUZZ_CHECK(directives->empty());
  std::vector<std::string> words;
  int last_line = 1;
  for (const ScriptDirective& d : *directives) {
    FUZZ_CHECK(d.line > last_line);
    last_line = d.line;
    FUZZ_CHECK(!d.tokens.empty());
    for (const std::string& t : d.tokens) {
      FUZZ_CHECK(t.find('\0') == std::string::npos && t.find('\n') == std::string::npos);
      words.push_back(t);
    }
  }
  FUZZ_CHECK(words.size() <= kMaxDirectiveTokens);

  std::string again = "#!/bin/sh\n";
  for (const std::string& w : words) again += "#LTD " + Quoted(w) + "\n";
  again += "exec true\n";
  if (again.size() > kMaxScriptHead) return 0;  // read only that far
  const auto back = ParseScriptDirectives(again, "again.sh");
  FUZZ_CHECK(back.ok());
  std::vector<std::string> back_words;
  for (const ScriptDirective& d : *back) {
    for (const std::string& t : d.tokens) back_words.push_back(t);
  }
  FUZZ_CHECK(back_words == words);
  return 0;
}
