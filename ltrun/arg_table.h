// A command line read against one table of options, the way torchrun's
// argparse reads its own: each option has its long names (every '-' in
// them may be typed '_' too: --nproc-per-node, --nproc_per_node), maybe a
// short one, and maybe an environment variable (torchrun's PET_*) whose
// value stands in when the line does not give the option. `--NAME VALUE`,
// `--NAME=VALUE`, `-X VALUE`, `-XVALUE` and `-X=VALUE` all work. The
// first word that is not an option (or whatever follows `--`) starts the
// program, whose words are all its own.
//
// Pure: the environment comes in as a function, nothing is printed, and
// every refusal is one line in ltd's words, so a fuzzer can call it alone.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ltd {

enum class ArgType {
  kFlag,      // given or not; its environment variable is 0 or an integer not 0
  kValue,     // one value; given twice is a mistake
  kRepeated,  // one value each time, all kept (--env K=V --env K2=V2)
};

struct ArgDef {
  std::string_view name;     // "nproc-per-node": the key of its values
  std::string_view aliases;  // more long names, space-separated: "devices"
  char short_name = 0;       // 'n' for -n
  ArgType type = ArgType::kValue;
  std::string_view env;         // "PET_NPROC_PER_NODE", or none
  std::string_view value_name;  // "N" in --help
  std::string_view help;        // "" hides it from --help and --list-options
};

struct ParsedArgs {
  // By ArgDef::name: the values given (a flag's: "1"), in order.
  std::map<std::string, std::vector<std::string>, std::less<>> values;
  // By ArgDef::name: how the user gave it ("--nproc_per_node", "-n",
  // "PET_NNODES"), for messages about its value.
  std::map<std::string, std::string, std::less<>> spelled;
  std::vector<std::string> program;  // PROGRAM and its arguments

  bool Has(std::string_view name) const { return values.contains(name); }
  // The option's value, or null when it was not given.
  const std::string* Get(std::string_view name) const;
  // How the user gave it, or "--NAME" when they did not.
  std::string Spelled(std::string_view name) const;
};

using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;

// The words after the program's name. An environment variable that is set
// but empty counts as not set (as torchrun's `if default:` does).
absl::StatusOr<ParsedArgs> ParseArgs(std::span<const ArgDef> table,
                                     std::span<const std::string> words, const EnvLookup& env);

// --help's option lines: each option's names, value and help, wrapped.
std::string ArgHelp(std::span<const ArgDef> table);

// `--list-options` for the bash completion (common/cli_options.h's
// format): "option - NAME flag|value" for each shown name.
std::string ArgList(std::span<const ArgDef> table);

}  // namespace ltd
