#include "shim_frames.h"

#include <limits>

namespace ltd {
namespace {

constexpr size_t kKeptRoom = 256 << 10;

}  // namespace

bool AppendFrame(const google::protobuf::MessageLite& message, std::string* out) {
  const size_t size = message.ByteSizeLong();
  if (size > std::numeric_limits<uint32_t>::max()) return false;
  const size_t at = out->size();
  out->resize(at + 4 + size);
  char* p = out->data() + at;
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  if (!message.SerializeToArray(p + 4, static_cast<int>(size))) {
    out->resize(at);
    return false;
  }
  return true;
}

FrameReader::Got FrameReader::Next(std::string_view* frame) {
  // What the frame handed out last held is taken now: drop it once it is
  // most of the buffer, so that the buffer does not grow with the stream.
  if (start_ > 0 && start_ * 2 >= buffer_.size()) {
    buffer_.erase(0, start_);
    start_ = 0;
    // A big frame (a record with a large command line) does not keep its
    // room for the life of the connection.
    if (buffer_.empty() && buffer_.capacity() > kKeptRoom) std::string().swap(buffer_);
  }
  const size_t have = buffer_.size() - start_;
  if (have < 4) return Got::kMore;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + start_);
  const size_t size = static_cast<size_t>(p[0]) | static_cast<size_t>(p[1]) << 8 |
                      static_cast<size_t>(p[2]) << 16 | static_cast<size_t>(p[3]) << 24;
  if (size > max_frame_) return Got::kTooLarge;
  if (have - 4 < size) return Got::kMore;
  *frame = std::string_view(buffer_).substr(start_ + 4, size);
  start_ += 4 + size;
  return Got::kFrame;
}

}  // namespace ltd
