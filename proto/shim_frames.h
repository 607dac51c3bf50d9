// The frames of the supervisor protocol (proto/shim.proto, api_version 2):
// a 4-byte little-endian length, then a serialized Call or Answer. Both
// ends read what the other wrote as hostile bytes: a frame longer than the
// reader's bound ends the connection before any of it is held.
#pragma once

#include <google/protobuf/message_lite.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ltd {

// ltd's calls are small (a kill's reason, a stack request).
constexpr size_t kMaxCallFrame = 64 << 10;
// A supervisor's answers carry the job's record, whose command line and
// environment a user fills (up to 2 MB each, ltd.proto's bounds), and a
// stack report of every rank (bounded by --stack-budget's text).
constexpr size_t kMaxAnswerFrame = 64 << 20;

// Appends `message` as one frame to `out`; false if it does not fit a
// frame (over 4 GiB) or does not serialize.
bool AppendFrame(const google::protobuf::MessageLite& message, std::string* out);

// Splits a byte stream into frames, holding at most one frame's bytes and
// what came after it in the same read.
class FrameReader {
 public:
  explicit FrameReader(size_t max_frame) : max_frame_(max_frame) {}

  void Feed(std::string_view bytes) { buffer_.append(bytes); }

  enum class Got { kFrame, kMore, kTooLarge };
  // kFrame: the next frame's bytes are in `*frame`, valid until the next
  // Feed or Next. kMore: no whole frame yet. kTooLarge: the next frame
  // says it is longer than the bound; the stream is not to be read on.
  Got Next(std::string_view* frame);

  // Bytes held: a part of a frame, and frames not yet taken.
  size_t buffered() const { return buffer_.size() - start_; }

 private:
  const size_t max_frame_;
  std::string buffer_;
  size_t start_ = 0;  // where the next frame begins in buffer_
};

}  // namespace ltd
