// The configuration file's reader: what it accepts, how it names what it
// refuses, and the key it suggests for a typo.
#include "config_file.h"

#include <gtest/gtest.h>

namespace ltd {
namespace {

TEST(ConfigFile, ReadsKeysValuesAndLines) {
  auto entries = ParseConfig(
      "# comment\n\n  socket = \"/run/x.sock\"  # trailing\nkeep-jobs=5\nauto-heartbeat = false\n"
      "gpus = '0,1'\r\nname = \"a \\\"q\\\" \\\\ b\"\n",
      "f.toml");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 5u);
  EXPECT_EQ((*entries)[0].key, "socket");
  EXPECT_EQ((*entries)[0].value, "/run/x.sock");
  EXPECT_EQ((*entries)[0].line, 3);
  EXPECT_EQ((*entries)[1].value, "5");
  EXPECT_EQ((*entries)[1].line, 4);
  EXPECT_EQ((*entries)[2].value, "false");
  EXPECT_EQ((*entries)[3].value, "0,1");
  EXPECT_EQ((*entries)[4].value, "a \"q\" \\ b");
}

TEST(ConfigFile, RefusalsNameTheFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[section]\n", "f.toml:1: ltd's configuration has no sections"},
      {"\nx\n", "f.toml:2: expected '=' after 'x'"},
      {"= 1\n", "f.toml:1: expected `key = value`"},
      {"a = \n", "f.toml:1: a: no value after '='"},
      {"a = \"open\n", "f.toml:1: a: a string with no closing quote"},
      {"a = 'open\n", "f.toml:1: a: a string with no closing quote"},
      {"a = bare\n", "f.toml:1: a: value 'bare' is neither a number nor true/false"},
      {"a = \"x\" y\n", "f.toml:1: a: text after the value"},
      {"a = \"\\q\"\n", "f.toml:1: a: unknown escape \\q"},
      {"a = 1\na = 2\n", "f.toml:2: 'a' is given twice"},
  };
  for (const auto& [text, message] : cases) {
    auto entries = ParseConfig(text, "f.toml");
    ASSERT_FALSE(entries.ok()) << text;
    // The message begins with the place and the problem; some say what to do after.
    EXPECT_TRUE(std::string(entries.status().message()).starts_with(message))
        << text << " -> " << entries.status().message();
  }
}

TEST(ConfigFile, HostileBytesNeverCrashIt) {
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk += static_cast<char>((i * 131 + 7) % 256);
  (void)ParseConfig(junk, "junk");
  (void)ParseConfig(std::string(1 << 16, '"'), "quotes");
  EXPECT_TRUE(ParseConfig("", "empty").ok());
}

// Found by fuzz/config_file: a refusal quoted the bytes of the file as
// they were (a bare value with a newline's \r or a terminal's escape, an
// unknown escape's byte, a key of a megabyte) in the one line ltd prints.
TEST(ConfigFile, RefusalsQuoteTheFileEscapedAndBounded) {
  for (const std::string& text :
       {std::string("a = b\x1b[2Jc\n"), std::string("a = x\ry\n"), std::string("a = \"\\\xff\"\n"),
        std::string(100000, 'k') + "\n", std::string(100000, 'k') + " = 1\n" + std::string(100000, 'k') + " = 2\n"}) {
    auto entries = ParseConfig(text, "f.toml");
    ASSERT_FALSE(entries.ok());
    const std::string message(entries.status().message());
    EXPECT_LT(message.size(), 300u) << message.substr(0, 80);
    for (unsigned char c : message) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << message;
  }
  EXPECT_EQ(ParseConfig("a = b\x1b\n", "f.toml").status().message(),
            "f.toml:1: a: value 'b\\x1B' is neither a number nor true/false; quote a string");
}

TEST(ConfigFile, NearestKeyForTypos) {
  const std::vector<std::string> keys = {"restore-window", "restart-backoff", "socket", "state-dir",
                                         "keep-jobs"};
  EXPECT_EQ(NearestKey("restore-windw", keys), "restore-window");
  EXPECT_EQ(NearestKey("restore_window", keys), "restore-window");
  EXPECT_EQ(NearestKey("sockt", keys), "socket");
  EXPECT_EQ(NearestKey("statedir", keys), "state-dir");
  EXPECT_EQ(NearestKey("frobnicate", keys), "");
}

}  // namespace
}  // namespace ltd
