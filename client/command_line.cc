#include "command_line.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "bytes.h"
#include "cli_options.h"
#include "cli_words.h"
#include "connection.h"
#include "fd.h"
#include "script_directives.h"
#include "str_util.h"

namespace ltd {
namespace {

// The file PROGRAM names, as exec would find it: a path with a '/' as it
// is, else the first in $PATH; "" when there is none.
std::string ProgramPath(const std::string& program) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t colon = dirs.find(':', at);
    if (colon == std::string_view::npos) colon = dirs.size();
    std::string dir(dirs.substr(at, colon - at));
    at = colon + 1;
    const std::string file = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (access(file.c_str(), X_OK) == 0) return file;
  }
  return "";
}

}  // namespace

std::string ParseErrorText(const CLI::App& app, const CLI::ParseError& e) {
  const auto verbs = app.get_subcommands();
  const CLI::App* verb = verbs.empty() ? nullptr : verbs.front();
  std::vector<std::string> verb_names;
  for (const CLI::App* v : app.get_subcommands([](const CLI::App*) { return true; })) {
    verb_names.push_back(v->get_name());
  }
  for (const std::string& extra : app.remaining(/*recurse=*/true)) {
    if (extra == "--") continue;
    if (extra.starts_with("-")) {
      std::vector<std::string> known = OptionNames(app);
      if (verb != nullptr) {
        for (std::string& name : OptionNames(*verb)) known.push_back(std::move(name));
      }
      return UnknownOptionText(extra, known);
    }
    if (verb == nullptr) return "unknown verb '" + extra + "'" + DidYouMean(extra, verb_names);
    return "'" + extra + "' is not expected: `ltctl " + verb->get_name() +
           " --help` says what it takes";
  }
  if (verb == nullptr) {
    std::string all;
    for (const std::string& v : verb_names) all += (all.empty() ? "" : ", ") + v;
    return "no verb given; give one of " + all;
  }
  return CliErrorText(e);
}

std::string NoDevicesText(const CLI::App& submit, const SubmitArgs& sa) {
  const std::vector<std::string> names = OptionNames(submit);
  for (size_t i = 1; i < sa.command.size(); ++i) {
    const std::string name = sa.command[i].substr(0, sa.command[i].find('='));
    if (!name.starts_with("-") || std::find(names.begin(), names.end(), name) == names.end()) {
      continue;
    }
    return "--devices is required; " + DisplayEscape(name, Controls::kEscape) +
           " is given after PROGRAM, where it is PROGRAM's own argument: put ltctl's options "
           "before PROGRAM (ltctl submit --devices N ... PROGRAM ARGS)";
  }
  return "--devices is required; give the number of ranks (--devices N)";
}

std::vector<std::string> ScriptOptions(const CLI::App& submit, const SubmitArgs& sa) {
  if (sa.command.empty()) return {};
  const std::string path = ProgramPath(sa.command.front());
  // As the user: ltctl is theirs. Not a regular file (a FIFO): none.
  Fd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  std::string head(kMaxScriptHead, '\0');
  size_t have = 0;
  while (have < head.size()) {
    const ssize_t n = read(fd.get(), head.data() + have, head.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  head.resize(have);
  const std::string shown = DisplayEscape(path, Controls::kEscape);
  auto directives = ParseScriptDirectives(head, shown);
  if (!directives.ok()) Die(std::string(directives.status().message()));
  const std::vector<std::string> names = OptionNames(submit);
  std::vector<std::string> out;
  for (const ScriptDirective& d : *directives) {
    const std::string where = Cat(shown, ":", d.line, ": #LTD: ");
    for (size_t i = 0; i < d.tokens.size(); ++i) {
      const std::string& token = d.tokens[i];
      const std::string name = token.substr(0, token.find('='));
      const CLI::Option* opt = token.starts_with("-") ? submit.get_option_no_throw(name) : nullptr;
      if (opt == nullptr || !opt->nonpositional()) {
        Die(where + (token.starts_with("-")
                         ? UnknownOptionText(DisplayEscape(token, Controls::kEscape), names)
                         : "'" + DisplayEscape(token, Controls::kEscape) +
                               "' is no option; #LTD lines hold submit's options"));
      }
      const bool takes_value = opt->get_expected_max() != 0 && token.find('=') == std::string::npos;
      if (takes_value && i + 1 >= d.tokens.size()) Die(where + name + " needs a value");
      if (opt->count() == 0) {  // the command line's own wins
        out.push_back(token);
        if (takes_value) out.push_back(d.tokens[i + 1]);
      }
      if (takes_value) ++i;
    }
  }
  return out;
}

}  // namespace ltd
