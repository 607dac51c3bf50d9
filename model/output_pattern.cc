#include "output_pattern.h"

#include "bytes.h"
#include "str_util.h"

namespace ltd {

absl::Status CheckOutputPattern(std::string_view flag, std::string_view pattern) {
  constexpr size_t kMaxBytes = 4096;
  if (pattern.size() > kMaxBytes || pattern.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        Cat(flag, " is over ", kMaxBytes, " bytes or holds a NUL byte; give a file path"));
  }
  if (pattern.empty() || pattern.back() == '/') {
    return absl::InvalidArgumentError(
        Cat(flag, " names no file; give a path such as out-%j-%r.log"));
  }
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    const char c = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (c != 'j' && c != 'r' && c != 'n' && c != '%') {
      return absl::InvalidArgumentError(
          Cat(flag, ": '%",
              c == '\0' ? std::string() : DisplayEscape(std::string(1, c), Controls::kEscape),
              "' is no pattern; use %j (job id), %r (rank), %n (name) or %% (a %)"));
    }
    ++i;
  }
  return absl::OkStatus();
}

std::string ExpandOutputPattern(std::string_view pattern, std::string_view job_id, int rank,
                                std::string_view name) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 >= pattern.size()) {
      out.push_back(pattern[i]);
      continue;
    }
    switch (pattern[++i]) {
      case 'j':
        out.append(job_id);
        break;
      case 'r':
        out.append(std::to_string(rank));
        break;
      case 'n':
        for (char c : name.empty() ? job_id : name) out.push_back(c == '/' ? '_' : c);
        break;
      default:
        out.push_back(pattern[i]);  // %% (CheckOutputPattern refused the rest)
    }
  }
  return out;
}

bool PatternPerRank(std::string_view pattern) {
  for (size_t i = 0; i + 1 < pattern.size(); ++i) {
    if (pattern[i] == '%') {
      if (pattern[i + 1] == 'r') return true;
      ++i;
    }
  }
  return false;
}

}  // namespace ltd
