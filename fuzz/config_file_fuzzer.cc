// ltd's configuration file (daemon/config/config_file.h, options.h): the
// TOML subset, then each key as its option takes it. Invariants: entries
// printed as TOML read back the same; keys are unique, line numbers
// increase; a refusal (a malformed line, an unknown key, a value its option
// refuses) is one bounded line naming the file and line, never a throw.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <set>

#include "config_file.h"
#include "file_io.h"
#include "fuzz_check.h"
#include "options.h"

using namespace ltd;

namespace {

std::string Quoted(const std::string& value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

const std::string& TempFile() {
  static const std::string path = [] {
    char dir[] = "/tmp/ltd-fuzz-config.XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    static std::string d = dir;
    std::atexit([] {
      unlink((d + "/ltd.toml").c_str());
      rmdir(d.c_str());
    });
    return d + "/ltd.toml";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<std::vector<ConfigEntry>> entries = ParseConfig(text, "ltd.toml");
  if (!entries.ok()) {
    fuzz::CheckRefusal(entries.status());
    FUZZ_CHECK(std::string(entries.status().message()).starts_with("ltd.toml:"));
    return 0;
  }
  std::set<std::string> keys;
  int line = 0;
  std::string printed;
  for (const ConfigEntry& e : *entries) {
    FUZZ_CHECK(!e.key.empty() && keys.insert(e.key).second);
    FUZZ_CHECK(e.line > line);
    line = e.line;
    printed += e.key + " = " + Quoted(e.value) + "\n";
  }
  const auto again = ParseConfig(printed, "printed");
  FUZZ_CHECK(again.ok() && again->size() == entries->size());
  for (size_t i = 0; i < again->size(); ++i) {
    FUZZ_CHECK((*again)[i].key == (*entries)[i].key && (*again)[i].value == (*entries)[i].value);
  }

  // As ltd reads it: from the file, into the options.
  FUZZ_CHECK(fuzz::PutFile(TempFile(), text));
  CLI::App app;
  Options options;
  AddOptions(app, options);
  ConfigSources sources;
  const absl::Status applied = ApplyConfigFile(app, TempFile(), true, &sources);
  if (!applied.ok()) fuzz::CheckRefusal(applied, 2048);
  return 0;
}
