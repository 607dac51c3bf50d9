#include "terminate_text.h"

namespace ltd {
namespace {

constexpr std::string_view kThrowing = "terminate called after throwing an instance of '";
constexpr std::string_view kWhat = "  what():  ";
constexpr std::string_view kNoException = "terminate called without an active exception";

// At most `max` bytes of `text`, never ending inside a UTF-8 sequence.
std::string_view Cut(std::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

}  // namespace

void TerminateText::Line(std::string_view line) {
  if (line.starts_with(kThrowing)) {
    std::string_view type = line.substr(kThrowing.size());
    if (const size_t quote = type.rfind('\''); quote != std::string_view::npos) {
      type = type.substr(0, quote);
    }
    text_ = "terminate called after throwing ";
    text_ += type.empty() ? std::string_view("an exception") : Cut(type, kMaxText - text_.size());
    awaiting_what_ = true;
    return;
  }
  if (line.starts_with(kNoException)) {
    text_ = kNoException;
    awaiting_what_ = false;
    return;
  }
  if (!awaiting_what_) return;
  // The line right after the type is its what(), or there is none.
  awaiting_what_ = false;
  if (!line.starts_with(kWhat)) return;
  const std::string_view what = line.substr(kWhat.size());
  if (what.empty() || text_.size() + 2 >= kMaxText) return;
  text_ += ": ";
  text_ += Cut(what, kMaxText - text_.size());
}

}  // namespace ltd
