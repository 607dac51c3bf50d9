// ltd's configuration file and every binary's command line, as an admin
// meets them: a misspelt key stops ltd naming the key, the file, the line
// and the key meant; --print-config says where each value came from; the
// start-up log names the file read; --version everywhere; ltrun refuses an
// option it does not know before PROGRAM, as ltctl does, with exit code 1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "harness.h"

namespace ltd::test {
namespace {

std::string LtrunPath() { return LtdPath().substr(0, LtdPath().rfind('/')) + "/ltrun"; }

class Config : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ltd-config-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& text) {
    const std::string path = dir_ + "/ltd.toml";
    std::ofstream(path, std::ios::trunc) << text;
    return path;
  }
  CmdResult Ltd(std::vector<std::string> args) {
    args.insert(args.begin(), LtdPath());
    return RunCommand(args, {}, 30s);
  }

  std::string dir_;
};

size_t Lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

TEST_F(Config, UnknownKeyStopsLtdWithTheKeyTheFileTheLineAndTheNearestKey) {
  const std::string path = Write("# a comment\nkeep-jobs = 5\nrestore-windw = \"1m\"\n");
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--print-config"},
        {"--socket", dir_ + "/s.sock", "--state-dir", dir_ + "/state", "--devices", "1"}}) {
    std::vector<std::string> args = {"--config", path};
    args.insert(args.end(), extra.begin(), extra.end());
    CmdResult r = Ltd(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(Lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(path + ":3: unknown key 'restore-windw'; did you mean 'restore-window'?"),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/s.sock"));  // it never started
}

TEST_F(Config, UnderscoresAndFarOffKeysAreNamedToo) {
  CmdResult r = Ltd({"--config", Write("restore_window = \"1m\"\n"), "--print-config"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("did you mean 'restore-window'?"), std::string::npos) << r.err;
  r = Ltd({"--config", Write("\nfrobnicate = 1\n"), "--print-config"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(":2: unknown key 'frobnicate'; see `ltd --help`"), std::string::npos)
      << r.err;
}

TEST_F(Config, BadValuesAndLinesAreOneLineWithTheirPlace) {
  const std::map<std::string, std::string> cases = {
      {"keep-jobs = \"many\"\n", ":1: keep-jobs:"},
      {"containment = \"jail\"\n", ":1: containment:"},
      {"\nsocket = \"/x\n", ":2: socket: a string with no closing quote"},
      {"[ltd]\n", ":1: ltd's configuration has no sections"},
      {"socket \"/x\"\n", ":1: expected '=' after 'socket'"},
      {"keep-jobs = 1\nkeep-jobs = 2\n", ":2: 'keep-jobs' is given twice"},
      {"devices = 2\ngpus = \"0\"\n", "devices and gpus exclude each other"},
  };
  for (const auto& [text, needle] : cases) {
    CmdResult r = Ltd({"--config", Write(text), "--print-config"});
    EXPECT_EQ(r.exit_code, 1) << text;
    EXPECT_EQ(Lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << text << " -> " << r.err;
  }
  CmdResult missing = Ltd({"--config", dir_ + "/none.toml", "--print-config"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find(dir_ + "/none.toml does not exist"), std::string::npos) << missing.err;
}

TEST_F(Config, PrintConfigSaysWhereEachValueCameFrom) {
  const std::string path =
      Write("restore-window = \"1m\"\nkeep-jobs = 5\nauto-heartbeat = false\n");
  CmdResult r = Ltd({"--config", path, "--keep-jobs", "7", "--print-config"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nrestore-window = \"1m\"  # file " + path + ":1\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nkeep-jobs = 7  # flag --keep-jobs\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nauto-heartbeat = false  # file " + path + ":3\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nsocket = \"/run/ltd/ltd.sock\"  # default\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\n# metrics-listen =  (not set)  # default\n"), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// The example the package installs as /etc/ltd/ltd.toml has every key,
// commented, at the default ltd itself reports.
TEST_F(Config, TheExampleConfigHasEveryKeyAtItsDefault) {
  CmdResult r = Ltd({"--config", Write(""), "--print-config"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(LT_SOURCE_DIR "/packaging/ltd.toml");
  std::stringstream example;
  example << in.rdbuf();
  ASSERT_FALSE(example.str().empty());
  std::istringstream lines(r.out);
  int keys = 0;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, std::regex(R"(([a-z-]+) = (.*)  # default)"))) {
      EXPECT_NE(example.str().find("\n#" + m[1].str() + " = " + m[2].str() + "\n"),
                std::string::npos)
          << line;
      ++keys;
    } else if (std::regex_match(line, m, std::regex(R"(# ([a-z-]+) =  \(not set\)  # default)"))) {
      EXPECT_NE(example.str().find("\n#" + m[1].str() + " = "), std::string::npos) << line;
      ++keys;
    }
  }
  EXPECT_GT(keys, 20);
  // And ltd reads it back as it is.
  CmdResult back = Ltd({"--config", LT_SOURCE_DIR "/packaging/ltd.toml", "--print-config"});
  EXPECT_EQ(back.exit_code, 0) << back.err;
}

TEST_F(Config, TheStartUpLogNamesTheFileRead) {
  Daemon d;
  const std::string path = d.dir() + "/ltd.toml";
  std::ofstream(path) << "keep-jobs = 5\n";
  ASSERT_TRUE(d.Start({"--config", path})) << d.log();
  EXPECT_EQ(d.Stop(), 0);
  EXPECT_NE(d.log().find("configuration from " + path), std::string::npos) << d.log();
  EXPECT_TRUE(std::regex_search(d.log(), std::regex("ltd [0-9]+\\.[0-9]+\\.[0-9]+"))) << d.log();
}

TEST(CommandLines, VersionOnEveryBinary) {
  for (const std::string& bin : {LtdPath(), LtctlPath(), LtrunPath()}) {
    CmdResult r = RunCommand({bin, "--version"}, {}, 30s);
    const std::string name = bin.substr(bin.rfind('/') + 1);
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_TRUE(std::regex_match(
        r.out, std::regex(name + " [0-9]+\\.[0-9]+\\.[0-9]+( \\(git [^)]+\\))?\n")))
        << name << ": " << r.out;
  }
}

// A command line the parser refuses gets ltd's words for it, not the
// parser library's ("At Most 1 required but received 2", "Could not
// convert: --devices = x", "1 required INT missing").
TEST(CommandLines, RefusedCommandLinesAreSaidInTheToolsOwnWords) {
  const std::string none = "/tmp/ltd-cli-test-none.sock";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{LtdPath(), "--devices", "1", "--devices", "2"},
       "ltd: --devices is given more than once; give it once; see `ltd --help`\n"},
      {{LtdPath(), "--max-tiem", "1h"},
       "ltd: unknown option --max-tiem (did you mean '--max-time'?); see `ltd --help`\n"},
      {{LtrunPath(), "--devices", "1", "--devices", "2", "--", "/bin/true"},
       "ltrun: --devices is given more than once; give it once; see `ltrun --help`\n"},
      {{LtctlPath(), "--socket", none, "submit", "--devices", "1", "--devices", "2", "/bin/true"},
       "ltctl: --devices is given more than once; give it once; see `ltctl --help`\n"},
      {{LtrunPath(), "--devices", "x", "--", "/bin/true"},
       "ltrun: --devices does not take 'x'; give a number, gpu, cpu or auto; see `ltrun --help`\n"},
      {{LtctlPath(), "--socket", none, "submit", "--devices", "x", "/bin/true"},
       "ltctl: --devices does not take 'x'; see `ltctl --help`\n"},
      {{LtrunPath(), "--devices"}, "ltrun: --devices needs a value; see `ltrun --help`\n"},
  };
  for (const auto& [argv, want] : cases) {
    CmdResult r = RunCommand(argv, {}, 30s);
    EXPECT_EQ(r.exit_code, 1) << argv[0];
    EXPECT_EQ(r.err, want);
  }
}

TEST(CommandLines, LtrunRefusesAnUnknownOptionBeforeProgramAsLtctlDoes) {
  char tmpl[] = "/tmp/ltrun-cli-test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string ran = std::string(tmpl) + "/ran";
  CmdResult ltrun = RunCommand({LtrunPath(), "--devcies", "2", "/bin/touch", ran}, {}, 30s);
  CmdResult ltctl = RunCommand({LtctlPath(), "--socket", std::string(tmpl) + "/none.sock", "submit",
                                "--devcies", "2", "/bin/touch", ran},
                               {}, 30s);
  for (const CmdResult& r : {ltrun, ltctl}) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(Lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("unknown option --devcies"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(ran));
  // After `--`, a program may start with '-' (it does not exist: 127).
  CmdResult dashed = RunCommand({LtrunPath(), "--", "-no-such-program"}, {}, 30s);
  EXPECT_EQ(dashed.err.find("unknown option"), std::string::npos) << dashed.err;
  EXPECT_EQ(dashed.exit_code, 127) << dashed.err;
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace ltd::test
