// What ltctl and ltd say for a command line their CLI11 parser refused
// that CLI11's own words would say badly ("A subcommand is required",
// "The following arguments were not expected: --devcies"): an unknown
// option or verb named, with the closest known one ("did you mean"), and
// nothing in CLI11's words.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "nearest_word.h"

namespace ltd {

// " (did you mean 'X'?)" for the known word nearest `typed`, or "".
inline std::string DidYouMean(std::string_view typed, const std::vector<std::string>& known) {
  const std::string near = NearestWord(typed, known);
  return near.empty() ? "" : " (did you mean '" + near + "'?)";
}

// Every name of `app`'s options ("--devices", "-d"), hidden ones too.
inline std::vector<std::string> OptionNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    if (!opt->nonpositional()) continue;
    for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
  }
  return names;
}

// "unknown option --devcies; did you mean '--devices'?" among `known`
// (the part of `typed` before a '=' is what is looked up).
inline std::string UnknownOptionText(std::string_view typed,
                                     const std::vector<std::string>& known) {
  const std::string_view name = typed.substr(0, typed.find('='));
  return std::string("unknown option ") + std::string(typed) + DidYouMean(name, known);
}

// The first argument `app` (`program`, of options only, as ltd) did not
// take, said as ours, or "" when there is none.
inline std::string ExtrasText(const CLI::App& app, std::string_view program) {
  for (const std::string& extra : app.remaining(/*recurse=*/true)) {
    if (extra == "--") continue;
    if (extra.starts_with("-")) return UnknownOptionText(extra, OptionNames(app));
    return "'" + extra + "' is not expected: " + std::string(program) + " takes options only";
  }
  return "";
}

}  // namespace ltd
