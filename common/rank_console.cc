#include "rank_console.h"

#include <charconv>

namespace ltd {
namespace {

// Room for "[2147483647] ".
constexpr size_t kPrefixMax = 16;

size_t FormatPrefix(int rank, char* buf) {
  buf[0] = '[';
  auto [end, ec] = std::to_chars(buf + 1, buf + kPrefixMax - 2, rank);
  (void)ec;  // an int always fits
  *end++ = ']';
  *end++ = ' ';
  return static_cast<size_t>(end - buf);
}

}  // namespace

RankConsole::RankConsole(std::FILE* out, std::FILE* err, std::string notice_prefix)
    : out_(out), err_(err), notice_prefix_(std::move(notice_prefix)) {
  // A full buffer whatever stdout is (a terminal is line buffered by
  // default): Idle() decides when bytes go out, not the line ends.
  std::setvbuf(out_, nullptr, _IOFBF, 64 * 1024);
}

RankConsole::~RankConsole() { Idle(); }

void RankConsole::Line(int rank, bool is_stderr, std::string_view line) {
  char prefix[kPrefixMax];
  const size_t n = prefix_ ? FormatPrefix(rank, prefix) : 0;
  if (!is_stderr) {
    std::fwrite(prefix, 1, n, out_);
    std::fwrite(line.data(), 1, line.size(), out_);
    std::fputc('\n', out_);
    out_dirty_ = true;
    return;
  }
  // Whatever stdout holds was read before this line.
  if (out_dirty_) Idle();
  scratch_.assign(prefix, n);
  scratch_.append(line);
  scratch_.push_back('\n');
  std::fwrite(scratch_.data(), 1, scratch_.size(), err_);
  std::fflush(err_);
}

void RankConsole::Notice(std::string_view text) {
  if (out_dirty_) Idle();
  scratch_.assign(notice_prefix_);
  scratch_.append(text);
  scratch_.push_back('\n');
  std::fwrite(scratch_.data(), 1, scratch_.size(), err_);
  std::fflush(err_);
}

void RankConsole::Raw(std::string_view bytes) {
  std::fwrite(bytes.data(), 1, bytes.size(), out_);
  out_dirty_ = true;
}

void RankConsole::Idle() {
  if (!out_dirty_) return;
  std::fflush(out_);
  out_dirty_ = false;
}

}  // namespace ltd
