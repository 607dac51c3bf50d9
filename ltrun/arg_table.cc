#include "arg_table.h"

#include <algorithm>

#include "bytes.h"
#include "nearest_word.h"
#include "str_util.h"

namespace ltd {
namespace {

// A user's word in a message: bytes escaped, never a terminal's control.
std::string Shown(std::string_view word) {
  return DisplayEscapeElided(std::string(word), 80, Controls::kEscape);
}

std::string Dashed(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

std::vector<std::string_view> LongNames(const ArgDef& def) {
  std::vector<std::string_view> names = {def.name};
  for (std::string_view a : Split(def.aliases, ' ')) {
    if (!a.empty()) names.push_back(a);
  }
  return names;
}

const ArgDef* FindLong(std::span<const ArgDef> table, std::string_view typed) {
  const std::string name = Dashed(typed);
  for (const ArgDef& def : table) {
    for (std::string_view n : LongNames(def)) {
      if (n == name) return &def;
    }
  }
  return nullptr;
}

const ArgDef* FindShort(std::span<const ArgDef> table, char c) {
  for (const ArgDef& def : table) {
    if (def.short_name != 0 && def.short_name == c) return &def;
  }
  return nullptr;
}

absl::Status Unknown(std::span<const ArgDef> table, std::string_view word) {
  std::vector<std::string> known;
  for (const ArgDef& def : table) {
    if (def.help.empty()) continue;
    for (std::string_view n : LongNames(def)) known.push_back(Cat("--", n));
  }
  const std::string typed(word.substr(0, word.find('=')));
  const std::string near = typed.starts_with("--") ? NearestWord(typed, known) : "";
  return absl::InvalidArgumentError(
      Cat("unknown option ", Shown(typed), near.empty() ? "" : Cat("; did you mean ", near, "?")));
}

// torchrun's check_env: a flag's variable is an integer, set when not 0.
absl::StatusOr<bool> EnvFlag(std::string_view var, const std::string& value) {
  size_t i = value.starts_with('-') || value.starts_with('+') ? 1 : 0;
  if (i == value.size() || value.find_first_not_of("0123456789", i) != std::string::npos) {
    return absl::InvalidArgumentError(
        Cat(var, "='", Shown(value), "' is not a number; set it to 1 (on) or 0 (off)"));
  }
  return value.find_first_not_of("0+-") != std::string::npos;
}

}  // namespace

const std::string* ParsedArgs::Get(std::string_view name) const {
  auto it = values.find(name);
  return it == values.end() || it->second.empty() ? nullptr : &it->second.back();
}

std::string ParsedArgs::Spelled(std::string_view name) const {
  auto it = spelled.find(name);
  return it != spelled.end() ? it->second : Cat("--", name);
}

absl::StatusOr<ParsedArgs> ParseArgs(std::span<const ArgDef> table,
                                     std::span<const std::string> words, const EnvLookup& env) {
  ParsedArgs out;
  size_t i = 0;
  for (; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") {
      ++i;
      break;
    }
    if (w.size() < 2 || w[0] != '-') break;  // PROGRAM
    const ArgDef* def = nullptr;
    std::string spelled;
    std::optional<std::string> inline_value;
    if (w.starts_with("--")) {
      const size_t eq = w.find('=');
      spelled = w.substr(0, eq);
      def = FindLong(table, std::string_view(spelled).substr(2));
      if (eq != std::string::npos) inline_value = w.substr(eq + 1);
    } else {
      spelled = w.substr(0, 2);
      def = FindShort(table, w[1]);
      if (w.size() > 2) inline_value = w[2] == '=' ? w.substr(3) : w.substr(2);
    }
    if (def == nullptr) return Unknown(table, w);
    const std::string name(def->name);
    if (def->type == ArgType::kFlag) {
      if (inline_value) {
        return absl::InvalidArgumentError(Cat(Shown(spelled), " takes no value"));
      }
      out.values[name] = {"1"};
      out.spelled[name] = spelled;
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= words.size()) {
        return absl::InvalidArgumentError(Cat(Shown(spelled), " needs a value"));
      }
      inline_value = words[++i];
    }
    if (def->type == ArgType::kValue && out.values.contains(name)) {
      return absl::InvalidArgumentError(
          Cat(Shown(spelled), " is given more than once; give it once"));
    }
    out.values[name].push_back(*inline_value);
    out.spelled[name] = spelled;
  }
  out.program.assign(words.begin() + static_cast<std::ptrdiff_t>(std::min(i, words.size())),
                     words.end());
  if (!env) return out;
  for (const ArgDef& def : table) {
    if (def.env.empty() || out.values.contains(def.name)) continue;
    std::optional<std::string> value = env(def.env);
    if (!value || value->empty()) continue;
    if (def.type == ArgType::kFlag) {
      auto on = EnvFlag(def.env, *value);
      if (!on.ok()) return on.status();
      if (!*on) continue;
      *value = "1";
    }
    out.values[std::string(def.name)] = {*value};
    out.spelled[std::string(def.name)] = std::string(def.env);
  }
  return out;
}

std::string ArgHelp(std::span<const ArgDef> table) {
  std::string out;
  for (const ArgDef& def : table) {
    if (def.help.empty()) continue;
    std::string names;
    if (def.short_name != 0) names = Cat("-", def.short_name);
    for (std::string_view n : LongNames(def)) names += Cat(names.empty() ? "" : ", ", "--", n);
    if (def.type != ArgType::kFlag)
      names += Cat(" ", def.value_name.empty() ? "VALUE" : def.value_name);
    out += Cat("  ", names, "\n");
    // The help, wrapped at 78 columns under the names.
    std::string line = "      ";
    for (std::string_view word : Split(def.help, ' ')) {
      if (line.size() + word.size() + 1 > 78 && line.size() > 6) {
        out += line + "\n";
        line = "      ";
      }
      line += Cat(line.size() > 6 ? " " : "", word);
    }
    if (!def.env.empty()) {
      const std::string from = Cat("(default: $", def.env, ")");
      if (line.size() + from.size() + 1 > 78) {
        out += line + "\n";
        line = "      ";
      }
      line += Cat(line.size() > 6 ? " " : "", from);
    }
    out += line + "\n";
  }
  return out;
}

std::string ArgList(std::span<const ArgDef> table) {
  std::string out;
  for (const ArgDef& def : table) {
    if (def.help.empty()) continue;
    const char* kind = def.type == ArgType::kFlag ? "flag" : "value";
    if (def.short_name != 0) out += Cat("option - -", def.short_name, " ", kind, "\n");
    for (std::string_view n : LongNames(def)) out += Cat("option - --", n, " ", kind, "\n");
  }
  return out;
}

}  // namespace ltd
