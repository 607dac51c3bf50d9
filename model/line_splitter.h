// Cuts a byte stream into lines. A line longer than the limit is delivered
// in limit-sized pieces marked `overlong`, so memory stays bounded whatever
// a rank writes; output keeps every byte, the heartbeat parser drops them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ltd {

class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line) : max_line_(max_line) {}

  // fn(std::string_view line, bool overlong), once per line, without '\n'.
  template <typename Fn>
  void Feed(std::string_view data, Fn&& fn) {
    while (!data.empty()) {
      const size_t nl = data.find('\n');
      const size_t room = max_line_ - pending_.size();
      if (nl != std::string_view::npos && nl <= room) {
        Emit(data.substr(0, nl), fn);
        in_overlong_ = false;
        data.remove_prefix(nl + 1);
      } else if (data.size() <= room) {
        // A line exactly the limit long waits for its newline: whether it
        // is overlong must not depend on where a read ended.
        pending_.append(data);
        return;
      } else {
        // No newline within the limit: hand out a full piece now.
        pending_.append(data.substr(0, room));
        data.remove_prefix(room);
        in_overlong_ = true;
        fn(std::string_view(pending_), true);
        pending_.clear();
      }
    }
  }

  // At end of stream: the last line, if it had no newline.
  template <typename Fn>
  void Finish(Fn&& fn) {
    if (!pending_.empty()) fn(std::string_view(pending_), in_overlong_);
    pending_.clear();
    in_overlong_ = false;
  }

 private:
  template <typename Fn>
  void Emit(std::string_view tail, Fn& fn) {
    if (pending_.empty()) {
      fn(tail, in_overlong_);
    } else {
      pending_.append(tail);
      fn(std::string_view(pending_), in_overlong_);
      pending_.clear();
    }
  }

  const size_t max_line_;
  std::string pending_;
  bool in_overlong_ = false;  // the current line already overflowed
};

}  // namespace ltd
