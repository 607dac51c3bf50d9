#include "output_pattern.h"

#include <optional>

#include "str_util.h"

namespace ltd {
namespace {

std::optional<PatternField> FieldOf(char c, int version) {
  switch (c) {
    case 'j':
      return PatternField::kJobId;
    case 'r':
      return PatternField::kLocalRank;
    case 'n':
      return version == kLegacyPatterns ? PatternField::kName : PatternField::kNode;
  }
  if (version == kLegacyPatterns) return std::nullopt;
  switch (c) {
    case 'x':
      return PatternField::kName;
    case 't':
      return PatternField::kRank;
    case 'N':
      return PatternField::kHost;
    case 'u':
      return PatternField::kUser;
    case 'A':
      return PatternField::kArrayJobId;
    case 'a':
      return PatternField::kArrayTaskId;
  }
  return std::nullopt;
}

void AppendSafe(std::string& out, std::string_view s) {
  for (char c : s) out.push_back(c == '/' ? '_' : c);
}

}  // namespace

absl::StatusOr<OutputPattern> ParseOutputPattern(std::string_view flag, std::string_view pattern,
                                                 int version) {
  if (pattern.size() > kMaxPatternBytes || pattern.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        Cat(flag, " is over ", kMaxPatternBytes, " bytes or holds a NUL byte; give a file path"));
  }
  if (pattern.empty() || pattern.back() == '/') {
    return absl::InvalidArgumentError(
        Cat(flag, " names no file; give a path such as out-%j-%t.log"));
  }
  OutputPattern out;
  std::string text;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      text.push_back(pattern[i]);
      continue;
    }
    const char c = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    ++i;
    if (c == '%') {
      text.push_back('%');
      continue;
    }
    const std::optional<PatternField> field = FieldOf(c, version);
    if (!field) {
      // The byte after % is a user's: printable ASCII as it is, else '\xNN'.
      std::string shown;
      if (c >= 0x21 && c < 0x7f) {
        shown = std::string(1, c);
      } else if (c != '\0') {
        static constexpr char kHex[] = "0123456789abcdef";
        const auto b = static_cast<unsigned char>(c);
        shown = Cat("\\x", kHex[b >> 4], kHex[b & 15]);
      }
      return absl::InvalidArgumentError(
          Cat(flag, ": '%", shown,
              "' is no pattern; use %j (job id), %x (name), %t (rank), %n (node), "
              "%N (host), %u (user), %A (array id), %a (array task) or %% (a %)"));
    }
    if (!text.empty()) out.pieces.emplace_back(std::move(text));
    text.clear();
    out.pieces.emplace_back(*field);
  }
  if (!text.empty()) out.pieces.emplace_back(std::move(text));
  return out;
}

absl::Status CheckOutputPattern(std::string_view flag, std::string_view pattern, int version) {
  return ParseOutputPattern(flag, pattern, version).status();
}

std::string ExpandOutputPattern(const OutputPattern& pattern, const PatternValues& v) {
  std::string out;
  for (const auto& piece : pattern.pieces) {
    if (const auto* text = std::get_if<std::string>(&piece)) {
      out.append(*text);
      continue;
    }
    switch (std::get<PatternField>(piece)) {
      case PatternField::kJobId:
        out.append(v.job_id);
        break;
      case PatternField::kName:
        AppendSafe(out, v.name.empty() ? v.job_id : v.name);
        break;
      case PatternField::kRank:
        out.append(std::to_string(v.rank));
        break;
      case PatternField::kLocalRank:
        out.append(std::to_string(v.local_rank));
        break;
      case PatternField::kNode:
        out.append(std::to_string(v.node));
        break;
      case PatternField::kHost:
        AppendSafe(out, v.host.substr(0, v.host.find('.')));
        break;
      case PatternField::kUser:
        AppendSafe(out, v.user);
        break;
      case PatternField::kArrayJobId:
        out.append(v.array_job_id.empty() ? v.job_id : v.array_job_id);
        break;
      case PatternField::kArrayTaskId:
        out.append(v.array_task_id);
        break;
    }
  }
  return out;
}

bool PatternPerRank(const OutputPattern& pattern) {
  for (const auto& piece : pattern.pieces) {
    const auto* f = std::get_if<PatternField>(&piece);
    if (f != nullptr && (*f == PatternField::kRank || *f == PatternField::kLocalRank)) return true;
  }
  return false;
}

bool PatternHasArrayTask(const OutputPattern& pattern) {
  for (const auto& piece : pattern.pieces) {
    const auto* f = std::get_if<PatternField>(&piece);
    if (f != nullptr && *f == PatternField::kArrayTaskId) return true;
  }
  return false;
}

bool PatternNeedsJob(const OutputPattern& pattern, bool has_name) {
  for (const auto& piece : pattern.pieces) {
    const auto* f = std::get_if<PatternField>(&piece);
    if (f == nullptr) continue;
    switch (*f) {
      case PatternField::kJobId:
      case PatternField::kNode:
      case PatternField::kHost:
      case PatternField::kUser:
      case PatternField::kArrayJobId:
      case PatternField::kArrayTaskId:
        return true;
      case PatternField::kName:
        if (!has_name) return true;
        break;
      case PatternField::kRank:
      case PatternField::kLocalRank:
        break;
    }
  }
  return false;
}

}  // namespace ltd
