// ltd: the daemon. Runs in the foreground and logs to stderr (systemd
// style). Threads: the main thread runs the libuv loop that owns all job
// state; gRPC runs on its own threads and posts work to the loop; one
// thread accepts connections on the socket.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli_options.h"
#include "cli_words.h"
#include "daemon.h"
#include "daemon_config.h"
#include "mutex_mode.h"
#include "options.h"
#include "version.h"

int main(int argc, char** argv) {
  ltd::NoMutexDeadlockGraph();
  ltd::Options opt;
  std::string config_path = "/etc/ltd/ltd.toml";
  bool print_config = false;
  CLI::App app{"ltd: supervises multi-rank training jobs; control it with ltctl"};
  auto* config = app.add_option("--config", config_path,
                                "TOML file whose keys are the options' names without --; flags "
                                "win over it (see ltd.toml(5))")
                     ->capture_default_str();
  app.add_flag("--print-config", print_config,
               "print the effective configuration and where each value came from, then exit");
  app.set_version_flag("--version", LTD_VERSION_LINE("ltd"));
  ltd::AddOptions(app, opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string text = ltd::ExtrasText(app, "ltd");  // an unknown option, with the closest known
    if (text.empty()) text = ltd::CliErrorText(e);
    std::fprintf(stderr, "ltd: %s; see `ltd --help`\n", text.c_str());
    return 1;
  }
  ltd::ConfigSources sources;
  if (auto s = ltd::ApplyConfigFile(app, config_path, config->count() > 0, &sources); !s.ok()) {
    std::fprintf(stderr, "ltd: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  if (print_config) {
    std::fputs(ltd::EffectiveConfig(app, sources).c_str(), stdout);
    return 0;
  }
  auto checked = ltd::FromFlags(opt);
  if (!checked.ok()) {
    std::fprintf(stderr, "ltd: %s\n", std::string(checked.status().message()).c_str());
    return 1;
  }
  auto daemon = ltd::Daemon::Start(std::move(*checked), sources);
  if (!daemon.ok()) {
    std::fprintf(stderr, "ltd: %s\n", std::string(daemon.status().message()).c_str());
    return 1;
  }
  (*daemon)->Run();
}
