// The supervisor protocol's frames (proto/shim_frames.h) as each end reads
// the other's bytes: ltd reads a supervisor's answers (records carrying a
// user's command line), a supervisor reads ltd's calls. The first byte
// picks the bound and how the rest is cut into reads; the rest is the
// stream. Invariants: any bytes, cut anywhere, give the same frames, none
// over the bound, never more bytes than came; a stream stops at a length
// over the bound and never holds more than a frame and a read past it; a
// frame that parses as a Call or an Answer is framed again and read back
// the same.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "shim.pb.h"
#include "shim_frames.h"

using namespace ltd;

namespace {

// The frames of `bytes` read in pieces of `step` bytes (0: all at once),
// and whether a length over `bound` stopped the stream.
std::vector<std::string> Read(std::string_view bytes, size_t bound, size_t step, bool* too_large) {
  FrameReader reader(bound);
  std::vector<std::string> frames;
  *too_large = false;
  size_t at = 0;
  do {
    const size_t n = step == 0 ? bytes.size() : std::min(step, bytes.size() - at);
    reader.Feed(bytes.substr(at, n));
    at += n;
    for (;;) {
      std::string_view frame;
      const FrameReader::Got got = reader.Next(&frame);
      if (got == FrameReader::Got::kMore) break;
      if (got == FrameReader::Got::kTooLarge) {
        *too_large = true;
        return frames;
      }
      FUZZ_CHECK(frame.size() <= bound);
      frames.emplace_back(frame);
    }
    // Held: at most a part of one frame, its length included.
    FUZZ_CHECK(reader.buffered() <= bound + 4);
  } while (at < bytes.size());
  return frames;
}

template <class Message>
void RoundTrip(const std::string& frame) {
  Message m;
  if (!m.ParseFromString(frame)) return;
  std::string again;
  FUZZ_CHECK(AppendFrame(m, &again));
  FrameReader reader(again.size());
  reader.Feed(again);
  std::string_view back;
  FUZZ_CHECK(reader.Next(&back) == FrameReader::Got::kFrame);
  Message m2;
  FUZZ_CHECK(m2.ParseFromString(std::string(back)));
  FUZZ_CHECK(m2.SerializeAsString() == m.SerializeAsString());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  // Small bounds reach "over the bound" with small inputs; the real ones
  // are the protocol's.
  const size_t bounds[] = {0, 7, 300, kMaxCallFrame};
  const size_t bound = bounds[control & 3];
  const size_t step = control >> 2;  // 0: one read
  bool too_large = false;
  const std::vector<std::string> frames = Read(bytes, bound, step, &too_large);
  bool whole_too_large = false;
  FUZZ_CHECK(Read(bytes, bound, 0, &whole_too_large) == frames);
  FUZZ_CHECK(whole_too_large == too_large);
  size_t total = 0;
  for (const std::string& f : frames) total += 4 + f.size();
  FUZZ_CHECK(total <= bytes.size());
  for (const std::string& f : frames) {
    RoundTrip<shim::v1::Call>(f);
    RoundTrip<shim::v1::Answer>(f);
  }
  return 0;
}
