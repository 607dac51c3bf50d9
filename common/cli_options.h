// `--list-options` (hidden) of ltctl and ltrun: every verb and option of
// the program's CLI11 parser, one per line, which the bash completion
// (packaging/completion/) reads, so that it offers exactly what the
// parser takes and never falls behind it:
//
//   verb VERB
//   option VERB NAME flag|value      (VERB "-": the program's own options)
//
// NAME is each of an option's names ("-d", "--detach"); hidden ones (no
// group) are left out, as --help leaves them out.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

namespace ltd {

// A command line CLI11 refused, said as ltd's tools say things (what was
// wrong, in the user's terms) where CLI11's own words are its own ("At
// Most 1 required but received 2", "Could not convert: --devices = x");
// its other messages ("--devices is required") pass as they are.
inline std::string CliErrorText(const CLI::ParseError& e) {
  const std::string what = e.what();
  if (e.get_name() == "ArgumentMismatch") {
    const std::string option = what.substr(0, what.find(": "));
    if (what.find("At Most 1 required but received") != std::string::npos) {
      return option + " is given more than once; give it once";
    }
    if (what.ends_with(" missing")) return option + " needs a value";
  }
  const std::string convert = "Could not convert: ";
  if (e.get_name() == "ConversionError" && what.starts_with(convert)) {
    const std::string rest = what.substr(convert.size());
    const size_t eq = rest.find(" = ");
    if (eq != std::string::npos) {
      return rest.substr(0, eq) + " does not take '" + rest.substr(eq + 3) + "'";
    }
  }
  return what;
}

inline void PrintCliOptions(const CLI::App& app, const std::string& verb, std::FILE* out) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group().empty() || opt->nonpositional() == false) continue;
    const char* kind = opt->get_expected_max() == 0 ? "flag" : "value";
    for (const std::string& s : opt->get_snames())
      std::fprintf(out, "option %s -%s %s\n", verb.c_str(), s.c_str(), kind);
    for (const std::string& l : opt->get_lnames())
      std::fprintf(out, "option %s --%s %s\n", verb.c_str(), l.c_str(), kind);
  }
  if (verb != "-") return;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_group().empty()) continue;
    std::fprintf(out, "verb %s\n", sub->get_name().c_str());
    PrintCliOptions(*sub, sub->get_name(), out);
  }
}

// `PROGRAM --list-options` alone: prints the list and returns true.
inline bool ListOptionsAsked(int argc, char** argv, const CLI::App& app) {
  if (argc != 2 || std::string(argv[1]) != "--list-options") return false;
  PrintCliOptions(app, "-", stdout);
  return true;
}

}  // namespace ltd
