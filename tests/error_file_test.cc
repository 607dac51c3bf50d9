// A TORCHELASTIC_ERROR_FILE's message (model/error_file.h): torchelastic's
// JSON and plain text read as a rank meant them, and bounded whatever the
// rank wrote.
#include "error_file.h"

#include <gtest/gtest.h>

#include <string>

#include "bytes.h"

namespace ltd {
namespace {

TEST(ErrorFile, TorchelasticsJsonOrAPlainMessageOrText) {
  EXPECT_EQ(ErrorFileMessage(R"({"message": {"message": "ValueError: bad", "extraInfo": {}}})"),
            "ValueError: bad");
  EXPECT_EQ(ErrorFileMessage(R"({"message": "RuntimeError: x"})"), "RuntimeError: x");
  EXPECT_EQ(ErrorFileMessage("Segfault in step 3\n"), "Segfault in step 3\n");
  EXPECT_EQ(ErrorFileMessage(" \n\t"), std::nullopt);
  EXPECT_EQ(ErrorFileMessage(""), std::nullopt);
  EXPECT_EQ(ErrorFileMessage(R"({"error": "x"})"), std::nullopt);
  EXPECT_EQ(ErrorFileMessage(R"({"message": 3})"), std::nullopt);
  EXPECT_EQ(ErrorFileMessage(R"([1, 2])"), std::nullopt);
  EXPECT_EQ(ErrorFileMessage(R"({"message": {"message": [1]}})"), std::nullopt);
}

TEST(ErrorFile, ALongMessageIsCutBetweenCharactersAndSaysHowMuch) {
  // JSON, plain text, and text of two- and three-byte characters whose
  // cut would fall inside one.
  const std::string plain(10000, 'a');
  const std::string accents = [] {
    std::string s;
    for (int i = 0; i < 3000; ++i) s += "\xC3\xA9";  // é
    return s;
  }();
  const std::string euros = [] {
    std::string s = "a";
    for (int i = 0; i < 3000; ++i) s += "\xE2\x82\xAC";  // €
    return s;
  }();
  for (const std::string& said : {plain, accents, euros}) {
    for (const std::string& file : {said, R"({"message": ")" + said + R"("})"}) {
      const auto message = ErrorFileMessage(file);
      ASSERT_TRUE(message.has_value());
      EXPECT_LE(message->size(), kMaxErrorFileMessage);
      EXPECT_TRUE(IsValidUtf8(*message)) << message->substr(message->size() - 40);
      const size_t mark = message->rfind("… [+");
      ASSERT_NE(mark, std::string::npos);
      EXPECT_EQ(message->substr(0, mark), said.substr(0, mark));
      EXPECT_EQ(message->substr(mark), ElisionMark(said.size() - mark));
    }
  }
  const std::string fits(kMaxErrorFileMessage, 'b');
  EXPECT_EQ(ErrorFileMessage(fits), fits);
}

TEST(ErrorFile, BytesThatAreNoUtf8AreKeptAsTheyCame) {
  const std::string text = std::string("bad \xFF\xFE byte") + std::string(5000, '\x80');
  const auto message = ErrorFileMessage(text);
  ASSERT_TRUE(message.has_value());
  EXPECT_LE(message->size(), kMaxErrorFileMessage);
  EXPECT_EQ(message->substr(0, 12), text.substr(0, 12));
}

}  // namespace
}  // namespace ltd
