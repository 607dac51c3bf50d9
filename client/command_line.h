// What ltctl makes of its command line beyond what CLI11 parses: a
// mistake in the user's words, and the #LTD lines of a script PROGRAM as
// submit options.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "submit.h"

namespace ltd {

// `e` in ltctl's words: an unknown verb or option with the closest known
// one; no verb at all.
std::string ParseErrorText(const CLI::App& app, const CLI::ParseError& e);

// submit without --devices (on the command line or a #LTD line): one line,
// which says so too when an option of submit's comes after PROGRAM, where
// it is PROGRAM's own.
std::string NoDevicesText(const CLI::App& submit, const SubmitArgs& sa);

// The #LTD lines of a script PROGRAM (script_directives.h), as submit
// options to add before the command line's: those the command line gives
// itself are left out (it wins), the rest checked to be submit's. Dies
// with one line naming the script's line for one that is not.
std::vector<std::string> ScriptOptions(const CLI::App& submit, const SubmitArgs& sa);

}  // namespace ltd
