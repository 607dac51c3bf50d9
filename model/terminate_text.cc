#include "terminate_text.h"

#include "bytes.h"

namespace ltd {
namespace {

constexpr std::string_view kThrowing = "terminate called after throwing an instance of '";
constexpr std::string_view kWhat = "  what():  ";
constexpr std::string_view kNoException = "terminate called without an active exception";

}  // namespace

void TerminateText::Line(std::string_view line) {
  if (line.starts_with(kThrowing)) {
    std::string_view type = line.substr(kThrowing.size());
    if (const size_t quote = type.rfind('\''); quote != std::string_view::npos) {
      type = type.substr(0, quote);
    }
    text_ = "terminate called after throwing ";
    text_ += type.empty() ? std::string_view("an exception")
                          : CutAtCharacter(type, kMaxText - text_.size());
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
  text_ += CutAtCharacter(what, kMaxText - text_.size());
}

}  // namespace ltd
