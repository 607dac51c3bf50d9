#include "bytes.h"

#include <gtest/gtest.h>

#include <random>

namespace ltd {
namespace {

using namespace std::string_literals;

TEST(Utf8, ValidTextIsValid) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii\t\n"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9"));       // é
  EXPECT_TRUE(IsValidUtf8("\xE2\x82\xAC"));      // €
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));  // U+1F600
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_TRUE(IsValidUtf8("\xED\x9F\xBF"));      // U+D7FF, below the surrogates
  EXPECT_TRUE(IsValidUtf8("\xEE\x80\x80"));      // U+E000, above them
  EXPECT_TRUE(IsValidUtf8("nul \0 inside"s));    // NUL is a character
}

TEST(Utf8, EveryKindOfInvalidSequenceIsInvalid) {
  for (const std::string& bad : {
           "caf\xE9"s,           // Latin-1
           "\x80"s,              // stray continuation
           "\xC0\xAF"s,          // overlong '/'
           "\xC1\xBF"s,          // overlong
           "\xE0\x80\xAF"s,      // overlong, 3 bytes
           "\xF0\x80\x80\xAF"s,  // overlong, 4 bytes
           "\xED\xA0\x80"s,      // U+D800, a surrogate
           "\xED\xBF\xBF"s,      // U+DFFF
           "\xF4\x90\x80\x80"s,  // U+110000
           "\xF5\x80\x80\x80"s,  // no such lead byte
           "\xFF"s, "\xFE"s,     //
           "\xE2\x82"s,          // cut short at the end
           "\xE2\x82x"s,         // cut short by ASCII
           "\xF0\x9F\x98"s,      // 4-byte sequence cut short
       }) {
    EXPECT_FALSE(IsValidUtf8(bad)) << DisplayEscape(bad);
  }
}

TEST(DisplayEscape, KeepsValidTextAndEscapesEachInvalidByte) {
  EXPECT_EQ(DisplayEscape("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(DisplayEscape("error caf\xE9"), "error caf\\xE9");
  EXPECT_EQ(DisplayEscape("\xC0\xAF"), "\\xC0\\xAF");           // overlong
  EXPECT_EQ(DisplayEscape("\xED\xA0\x80"), "\\xED\\xA0\\x80");  // surrogate
  EXPECT_EQ(DisplayEscape("\xE2\x82x"), "\\xE2\\x82x");         // truncated, then ASCII
  EXPECT_EQ(DisplayEscape("\xF0\x9F\x98"), "\\xF0\\x9F\\x98");  // truncated at the end
  EXPECT_EQ(DisplayEscape("\xE2\x82\xE2\x82\xAC"), "\\xE2\\x82\xE2\x82\xAC");  // then a valid €
  EXPECT_EQ(DisplayEscape("\xF4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");
}

TEST(DisplayEscape, ControlsAsAsked) {
  const std::string s =
      "a\tb\nc\rd\x1b[2Je\x7F\xC2\x9B"
      "f\0g"s;
  EXPECT_EQ(DisplayEscape(s), s);  // kKeep
  EXPECT_EQ(DisplayEscape(s, Controls::kEscape), "a\tb\\nc\\rd\\x1B[2Je\\x7F\\u009Bf\\x00g");
  EXPECT_EQ(DisplayEscape(s, Controls::kKeepNewlines), "a\tb\nc\\rd\\x1B[2Je\\x7F\\u009Bf\\x00g");
  EXPECT_EQ(DisplayEscape("\xC2\xA0", Controls::kEscape), "\xC2\xA0");  // NBSP is no control
}

TEST(DisplayEscape, ElidesBetweenCharactersWithAVisibleMark) {
  EXPECT_EQ(DisplayEscapeElided("short", 10), "short");
  EXPECT_EQ(DisplayEscapeElided("0123456789abc", 10), "0123456789… [+3 bytes]");
  // A cut never splits a character nor an escape.
  EXPECT_EQ(DisplayEscapeElided("abc\xC3\xA9", 4), "abc… [+2 bytes]");
  EXPECT_EQ(DisplayEscapeElided("ab\xE9z", 4), "ab… [+2 bytes]");
  EXPECT_EQ(DisplayEscapeElided("ab\xE9z", 6), "ab\\xE9… [+1 bytes]");
  EXPECT_TRUE(IsValidUtf8(DisplayEscapeElided(std::string(1000, '\xE9'), 101)));
}

TEST(DisplayEscape, RandomBytesAlwaysGiveValidUtf8) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes(rng() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    for (Controls c : {Controls::kKeep, Controls::kEscape, Controls::kKeepNewlines}) {
      const std::string text = DisplayEscape(bytes, c);
      ASSERT_TRUE(IsValidUtf8(text));
      EXPECT_GE(text.size(), bytes.size());  // nothing dropped
      if (c == Controls::kEscape) {
        EXPECT_EQ(text.find('\n'), std::string::npos);
      }
    }
  }
}

TEST(BytesJson, ValidUtf8IsAPlainStringElseBase64) {
  EXPECT_EQ(BytesToJson("caf\xC3\xA9"), nlohmann::json("caf\xC3\xA9"));
  const nlohmann::json j = BytesToJson("caf\xE9");
  ASSERT_TRUE(j.is_object()) << j.dump();
  EXPECT_EQ(j, nlohmann::json({{"base64", "Y2Fm6Q=="}}));
  EXPECT_EQ(BytesFromJson(j), "caf\xE9");
  EXPECT_EQ(BytesFromJson(nlohmann::json("x")), "x");
  EXPECT_FALSE(BytesFromJson(nlohmann::json(7)));
  EXPECT_FALSE(BytesFromJson(nlohmann::json({{"base64", "!!"}})));
  EXPECT_FALSE(BytesFromJson(nlohmann::json({{"hex", "00"}})));
}

TEST(BytesJson, RandomBytesRoundTripThroughDumpAndParse) {
  std::mt19937 rng(11);
  for (int round = 0; round < 3000; ++round) {
    std::string bytes(rng() % 40, '\0');
    // Mostly ASCII with some high bytes, so both forms come up.
    for (char& c : bytes) c = static_cast<char>(rng() % 4 == 0 ? rng() : rng() % 128);
    nlohmann::json record = {{"argv", {BytesToJson(bytes)}}};
    const std::string text = record.dump();  // must not throw
    auto back = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(back.is_discarded()) << text;
    EXPECT_EQ(BytesFromJson(back["argv"][0]), bytes) << text;
  }
}

}  // namespace
}  // namespace ltd
