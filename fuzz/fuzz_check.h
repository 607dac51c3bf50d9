// What every harness checks beside "no crash": an invariant that fails
// stops the run as a crash does (the input is saved), with the condition
// named; and a refusal a user reads is one bounded line.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "bytes.h"

#define FUZZ_CHECK(cond)                                                               \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

namespace ltd::fuzz {

// A message for a person: valid UTF-8 (a protobuf string, a terminal), no
// control character (one line, never a terminal's escape), at most `max`
// bytes (whatever was sent, the answer stays small).
inline bool IsOneLine(std::string_view text, size_t max) {
  if (text.size() > max || !IsValidUtf8(text)) return false;
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

inline void CheckRefusal(const absl::Status& s, size_t max = 1024) {
  FUZZ_CHECK(!s.ok());
  const std::string_view m(s.message().data(), s.message().size());
  if (!IsOneLine(m, max)) {
    std::fprintf(stderr, "refusal is not one bounded line: %s\n", ForLog(m).c_str());
    std::abort();
  }
}

// `text` as the whole of the file at `path` (made or truncated).
inline bool PutFile(const std::string& path, std::string_view text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  return close(fd) == 0 && ok;
}

// Takes the input apart: a harness that needs several fields reads them
// in turn; past the end, each is empty or zero.
class Input {
 public:
  Input(const uint8_t* data, size_t size)
      : data_(reinterpret_cast<const char*>(data)), left_(size) {}

  uint8_t Byte() {
    if (left_ == 0) return 0;
    --left_;
    return static_cast<uint8_t>(*data_++);
  }
  template <typename T>
  T Number() {
    T v{};
    for (size_t i = 0; i < sizeof(T); ++i) v = static_cast<T>((v << 8) | Byte());
    return v;
  }
  // The bytes up to the next `sep` (taken off), or all that is left.
  std::string_view Field(char sep = '\n') {
    const std::string_view rest(data_, left_);
    const size_t at = rest.find(sep);
    const std::string_view field = rest.substr(0, at);
    const size_t took = at == std::string_view::npos ? left_ : at + 1;
    data_ += took;
    left_ -= took;
    return field;
  }
  std::string_view Rest() {
    const std::string_view rest(data_, left_);
    data_ += left_;
    left_ = 0;
    return rest;
  }
  size_t left() const { return left_; }

 private:
  const char* data_;
  size_t left_;
};

}  // namespace ltd::fuzz
