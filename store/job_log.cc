#include "job_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>

#include "absl/strings/numbers.h"
#include "dir_entries.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

constexpr char kHead[] = "log.head";
constexpr char kTailPrefix[] = "log.tail.";
constexpr char kCut[] = "log.cut";
constexpr size_t kChunk = 64 * 1024;

// memchr from one newline to the next: ~5 ns a 50-byte line, a sixth of
// std::count's bytewise loop, and a tenth of a supervisor's cost per line
// (bench/line_path_cost).
uint64_t CountLines(std::string_view text) {
  uint64_t n = 0;
  for (const char *p = text.data(), *end = p + text.size();
       (p = static_cast<const char*>(memchr(p, '\n', static_cast<size_t>(end - p)))) != nullptr;
       ++p) {
    ++n;
  }
  return n;
}

uint64_t FileSize(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

Fd OpenAppend(const std::string& path) {
  return Fd(open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
}

// The sequence numbers of the tail files in `dir`, ascending.
std::vector<uint64_t> TailSeqs(const std::string& dir) {
  std::vector<uint64_t> seqs;
  const Fd d(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d.valid()) return seqs;
  ForEachDirEntry(d.get(), [&](std::string_view name) {
    uint64_t seq = 0;
    if (name.starts_with(kTailPrefix) &&
        absl::SimpleAtoi(std::string(name.substr(sizeof kTailPrefix - 1)), &seq)) {
      seqs.push_back(seq);
    }
    return true;
  });
  std::sort(seqs.begin(), seqs.end());
  return seqs;
}

// log.cut, "BYTES LINES FIRST": the bytes and lines cut, every one before
// the tail file FIRST. LINES is "-" where not known; a log of an older
// release has BYTES alone.
struct Cut {
  uint64_t bytes = 0;
  std::optional<uint64_t> lines = 0;
  std::optional<uint64_t> first = 0;  // none: not said (an older log)
};
Cut ReadCut(const std::string& dir) {
  Cut cut;
  FILE* f = fopen((dir + "/" + kCut).c_str(), "re");
  if (f == nullptr) return cut;
  char text[128] = {};
  if (fgets(text, sizeof text, f) == nullptr) text[0] = 0;
  fclose(f);
  unsigned long long bytes = 0, lines = 0, first = 0;
  char said[24] = {};
  const int n = std::sscanf(text, "%llu %23s %llu", &bytes, said, &first);
  // No log reaches 2^62 bytes: a larger count is a damaged or hostile
  // file, taken as that bound (lines not known), so that positions past
  // the cut (the head's size plus it plus the tails') cannot wrap.
  constexpr unsigned long long kMaxCut = 1ULL << 62;
  cut.bytes = n >= 1 ? std::min(bytes, kMaxCut) : 0;
  cut.lines = n >= 2 && bytes <= kMaxCut && std::sscanf(said, "%llu", &lines) == 1 && lines <= bytes
                  ? std::optional<uint64_t>(lines)
                  : std::nullopt;
  cut.first = n >= 3 ? std::optional<uint64_t>(first) : std::nullopt;
  return cut;
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a full disk: the bytes are lost, the loop is not
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// Whether a stored line belongs to `rank` (marker lines belong to all);
// `line` is then what to show, without its stamp.
bool Keep(int rank, std::string_view& line) {
  if (!StampOf(line).empty()) line.remove_prefix(kLogStampBytes);
  if (rank < 0) return true;
  if (line.starts_with("[ltd]")) return true;
  const std::string prefix = Cat("[", rank, "] ");
  if (!line.starts_with(prefix)) return false;
  line.remove_prefix(prefix.size());
  return true;
}

}  // namespace

std::string_view StampOf(std::string_view line) {
  if (line.size() < kLogStampBytes || line[kLogStampBytes - 1] != ' ' ||
      (line[kLogStampBytes - 2] != 'Z' && line[kLogStampBytes - 2] != 'z') || line[10] != 'T' ||
      line[0] < '0' || line[0] > '9') {
    return {};
  }
  return line.substr(0, kLogStampBytes - 1);
}

bool StoredStderr(std::string_view line) {
  return !StampOf(line).empty() && line[kLogStampBytes - 2] == 'z';
}

std::string LogStamp(WallTime t) {
  // One strftime a second: a supervisor stamps every chunk of output.
  thread_local int64_t cached_secs = -1;
  thread_local char cached[24];
  const int64_t us = std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
  const int64_t secs = us / 1000000;
  if (secs != cached_secs) {
    const std::time_t tt = static_cast<std::time_t>(secs);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    if (std::strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm) != 19) return {};
    cached_secs = secs;
  }
  char buf[kLogStampBytes];
  std::memcpy(buf, cached, 19);
  buf[19] = '.';
  for (int i = 25, frac = static_cast<int>(us % 1000000); i >= 20; --i, frac /= 10) {
    buf[i] = static_cast<char>('0' + frac % 10);
  }
  buf[26] = 'Z';
  buf[27] = ' ';
  return std::string(buf, kLogStampBytes);
}

namespace {
constexpr std::string_view kCutHere = " of output cut here: ";
}  // namespace

std::string CutMarker(uint64_t cut, std::optional<uint64_t> lines) {
  return Cat("[ltd] ", lines ? Cat(*lines, " lines (", cut, " bytes)") : Cat(cut, " bytes"),
             kCutHere,
             "the job printed more than ltd keeps (--job-max-log-bytes); the head and the tail "
             "are kept\n");
}

std::string CutOfMarker(std::string_view line) {
  const size_t here = line.find(kCutHere);
  if (here == std::string_view::npos) return "";
  const std::string what(line.substr(0, here));
  unsigned long long lines = 0, bytes = 0;
  int end = -1;
  if (std::sscanf(what.c_str(), "%llu lines (%llu bytes)%n", &lines, &bytes, &end) == 2 &&
      end == static_cast<int>(what.size())) {
    return Cat(lines, " lines (", bytes, " bytes)");
  }
  end = -1;
  if (std::sscanf(what.c_str(), "%llu bytes%n", &bytes, &end) == 1 &&
      end == static_cast<int>(what.size())) {
    return Cat(bytes, " bytes");
  }
  return "";
}

absl::StatusOr<JobLogWriter> JobLogWriter::Open(const std::string& dir, uint64_t max_bytes) {
  JobLogWriter w(dir, std::max<uint64_t>(max_bytes, 4 * kChunk));
  const std::string head = dir + "/" + kHead;
  // The head is the first file a log has: made here, it is a new log, with
  // nothing cut and no tail to go on from (a job's first attempt, most).
  w.head_ =
      Fd(open(head.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (w.head_.valid()) return w;
  if (errno == EEXIST) w.head_ = OpenAppend(head);
  if (!w.head_.valid()) {
    return absl::UnavailableError(Cat("open(", dir, "/", kHead, "): ", std::strerror(errno)));
  }
  w.head_size_ = FileSize(w.head_.get());
  const Cut cut = ReadCut(dir);
  w.cut_ = cut.bytes;
  w.cut_lines_ = cut.lines;
  std::vector<uint64_t> seqs = TailSeqs(dir);
  // A cut the last attempt said but did not finish (its file not unlinked
  // yet): finished now; the cut counts it already.
  while (cut.first && !seqs.empty() && seqs.front() < *cut.first) {
    unlink(Cat(dir, "/", kTailPrefix, seqs.front()).c_str());
    seqs.erase(seqs.begin());
  }
  w.written_ = w.head_size_ + w.cut_;
  if (!seqs.empty()) {
    // An earlier attempt got as far as the tail: go on there.
    w.head_full_ = true;
    w.tail_seq_ = seqs.back();
    w.tail_ = OpenAppend(Cat(dir, "/", kTailPrefix, w.tail_seq_));
    w.tail_size_ = w.tail_.valid() ? FileSize(w.tail_.get()) : 0;
    w.tail_lines_.reset();  // the last attempt's lines: not read again to count
    w.has_prev_ = seqs.size() > 1;
    if (w.has_prev_) {
      struct stat st {};
      if (stat(Cat(dir, "/", kTailPrefix, seqs[seqs.size() - 2]).c_str(), &st) == 0)
        w.prev_tail_size_ = static_cast<uint64_t>(st.st_size);
    }
    w.written_ += w.tail_size_ + w.prev_tail_size_;
  }
  return w;
}

void JobLogWriter::Append(std::string_view lines) {
  written_ += lines.size();
  if (!head_full_) {
    // The head ends on a line boundary, at half the bound.
    const uint64_t room = max_ / 2 - head_size_;
    std::string_view fits = lines;
    if (fits.size() > room) {
      const size_t nl = fits.substr(0, room).rfind('\n');
      fits = nl == std::string_view::npos ? std::string_view() : fits.substr(0, nl + 1);
      head_full_ = true;
    }
    WriteAll(head_.get(), fits);
    head_size_ += fits.size();
    lines.remove_prefix(fits.size());
    if (lines.empty()) return;
  }
  if (!tail_.valid() || (tail_size_ > 0 && tail_size_ + lines.size() > max_ / 4)) Rotate();
  if (!tail_.valid()) return;
  WriteAll(tail_.get(), lines);
  tail_size_ += lines.size();
  // Counted as they go by (the bytes are in the cache already): what a cut
  // drops is then told in lines too.
  if (tail_lines_) *tail_lines_ += CountLines(lines);
}

void JobLogWriter::Rotate() {
  if (tail_.valid()) {
    // The one before the current goes: that is the cut. Said first, then
    // unlinked: ltd reads log.cut for which tails are kept
    // (LogSnapshot::Take), so it never counts a file twice or misses one.
    if (has_prev_) {
      cut_ += prev_tail_size_;
      cut_lines_ = cut_lines_ && prev_tail_lines_
                       ? std::optional<uint64_t>(*cut_lines_ + *prev_tail_lines_)
                       : std::nullopt;
      WriteCut();
      unlink(Cat(dir_, "/", kTailPrefix, tail_seq_ - 1).c_str());
    }
    prev_tail_size_ = tail_size_;
    prev_tail_lines_ = tail_lines_;
    has_prev_ = true;
    ++tail_seq_;
  }
  tail_size_ = 0;
  tail_lines_ = 0;
  tail_ = OpenAppend(Cat(dir_, "/", kTailPrefix, tail_seq_));
  if (!tail_.valid()) spdlog::warn("log {}: {}", dir_, std::strerror(errno));
}

void JobLogWriter::WriteCut() {
  const std::string path = dir_ + "/" + kCut;
  const std::string tmp = path + ".tmp";
  Fd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return;
  // ltd reads it while this goes on: the first tail kept (the current one)
  // tells it which files the cut counts.
  WriteAll(fd.get(), Cat(cut_, " ", cut_lines_ ? Cat(*cut_lines_) : "-", " ", tail_seq_, "\n"));
  if (rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
}

namespace {

// One try at a snapshot; false when the writer cut the log meanwhile, so
// that its files and log.cut do not match.
bool TakeOnce(const std::string& dir, LogSnapshot& snap) {
  snap = LogSnapshot();
  // Each file's size as it is opened; the head's inode is the log's id.
  auto add = [&](const std::string& path, uint64_t* id = nullptr) {
    Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) return false;
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) st = {};
    if (id != nullptr) *id = static_cast<uint64_t>(st.st_ino);
    snap.files.push_back({std::move(fd), static_cast<uint64_t>(st.st_size)});
    return true;
  };
  // The head is a log's first file (JobLogWriter::Open), never cut: without
  // it there is no log yet (a job not started), nothing cut and no tail.
  if (!add(dir + "/" + kHead, &snap.id)) return true;
  const Cut cut = ReadCut(dir);
  bool whole = true;
  std::vector<uint64_t> seqs = TailSeqs(dir);
  // One the cut counts already is being unlinked.
  if (cut.first) std::erase_if(seqs, [&](uint64_t seq) { return seq < *cut.first; });
  const size_t from = seqs.size() > 2 ? seqs.size() - 2 : 0;
  // The first tail must be the one the cut ends before: else it was cut
  // since log.cut was read.
  if (from < seqs.size() && cut.first && seqs[from] != *cut.first) whole = false;
  for (size_t i = from; i < seqs.size(); ++i) {
    // Unlinked since it was listed: cut meanwhile.
    if (!add(Cat(dir, "/", kTailPrefix, seqs[i]))) whole = false;
  }
  // The head's size once the tails are open: the writer fills the head
  // before it makes the first tail, so with a tail it has all it will.
  // Without one, the size it was opened with ends the snapshot (the head
  // only grows, so that is a whole beginning of the log).
  if (snap.files.size() > 1) snap.files[0].size = FileSize(snap.files[0].fd.get());
  snap.cut = cut.bytes;
  snap.cut_lines = cut.lines;
  return whole;
}

}  // namespace

LogSnapshot LogSnapshot::Take(const std::string& dir) {
  // The writer is another process (the job's supervisor): it says a cut
  // in log.cut, then unlinks the file. A snapshot whose files are not the
  // ones log.cut names (one was unlinked between the read of log.cut and
  // its open) would place the tail wrongly, and a reader would skip or
  // repeat lines: it is taken again, and the next read of log.cut names
  // the files there now. A writer cuts once per quarter of the bound
  // written, so a few tries are enough; past them it is taken as it is.
  LogSnapshot snap;
  for (int i = 0; i < 16 && !TakeOnce(dir, snap); ++i) {
  }
  return snap;
}

uint64_t LogSnapshot::End() const {
  uint64_t end = 0;
  for (size_t i = 0; i < files.size(); ++i) end += files[i].size + (i == 1 ? cut : 0);
  return end;
}

uint64_t LogSnapshot::LastLineEnd() const {
  const uint64_t end = End();
  // The writer appends whole lines, so only the newest file may end inside
  // one (being written): back to its last newline.
  for (size_t i = files.size(); i-- > 0;) {
    if (files[i].size == 0) continue;
    const size_t len = static_cast<size_t>(std::min<uint64_t>(kChunk, files[i].size));
    std::string buf(len, '\0');
    const ssize_t n =
        pread(files[i].fd.get(), buf.data(), len, static_cast<off_t>(files[i].size - len));
    if (n != static_cast<ssize_t>(len)) return end;
    const size_t nl = buf.rfind('\n');
    return nl == std::string::npos ? end : end - (len - nl - 1);
  }
  return end;
}

LogCursor::LogCursor(LogSnapshot snapshot, LogQuery query, std::optional<uint64_t> from)
    : snapshot_(std::move(snapshot)), query_(query) {
  uint64_t logical = 0;
  for (size_t i = 0; i < snapshot_.files.size(); ++i) {
    if (i == 1) logical += snapshot_.cut;  // the tail starts past what was cut
    if (i == 1 && snapshot_.cut > 0) {
      segs_.push_back({-1, 0, CutMarker(snapshot_.cut, snapshot_.cut_lines), logical});
    }
    segs_.push_back({snapshot_.files[i].fd.get(), snapshot_.files[i].size, {}, logical});
    logical += snapshot_.files[i].size;
  }
  for (Segment& seg : segs_) {
    if (seg.fd < 0) seg.size = seg.text.size();
  }
  if (!from) return;
  positioned_ = true;
  seg_ = segs_.size();
  for (size_t i = 0; i < segs_.size(); ++i) {
    const Segment& seg = segs_[i];
    if (seg.fd < 0) {
      if (*from < seg.logical) {  // in what was cut: say so, go on after it
        seg_ = i;
        off_ = 0;
        // From inside the cut (a reader that had read part of it): what
        // it missed, in bytes (the lines of that part are not known).
        const uint64_t head_end = i > 0 ? segs_[i - 1].logical + segs_[i - 1].size : 0;
        if (*from > head_end) {
          segs_[i].text = CutMarker(seg.logical - *from);
          segs_[i].size = segs_[i].text.size();
        }
        return;
      }
      continue;
    }
    if (*from < seg.logical + seg.size) {
      seg_ = i;
      off_ = *from > seg.logical ? *from - seg.logical : 0;
      return;
    }
  }
}

uint64_t LogCursor::position() const {
  // A held line (whole_lines, or the part of a line a chunk ended in) is
  // not returned yet.
  const uint64_t held = carry_.size();
  if (seg_ >= segs_.size()) {
    for (size_t i = segs_.size(); i-- > 0;) {
      if (segs_[i].fd >= 0) return segs_[i].logical + segs_[i].size - held;
    }
    return 0;
  }
  const Segment& seg = segs_[seg_];
  return seg.fd < 0 ? seg.logical : seg.logical + off_ - held;
}

bool LogCursor::Read(size_t seg, uint64_t off, size_t len, std::string& out) const {
  const Segment& s = segs_[seg];
  if (s.fd < 0) {
    out.assign(s.text, off, len);
    return true;
  }
  out.resize(len);
  size_t got = 0;
  while (got < len) {
    const ssize_t n = pread(s.fd, out.data() + got, len - got, static_cast<off_t>(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return got == len;
}

bool LogCursor::SeekToTail() {
  // Backwards from the end, counting kept lines, until the N-th from the
  // end starts: forward reading begins there. Whether a line is kept shows
  // in its first bytes ("[R] ", "[ltd]"), so only those are looked at, and
  // one chunk is held whatever N is.
  constexpr size_t kPrefix = 32 + kLogStampBytes;
  const auto want = static_cast<uint64_t>(query_.tail);
  if (!seek_) {
    seek_.emplace();
    seek_->seg = segs_.size();
    seek_->end = segs_.empty() ? 0 : segs_.back().size;
  }
  LogTailSeek& t = *seek_;
  std::string buf;
  uint64_t scanned = 0;
  while (t.seg > 0) {
    if (t.end == 0) {
      if (--t.seg > 0) t.end = segs_[t.seg - 1].size;
      continue;
    }
    if (scanned >= kScanBytes) return false;
    const size_t seg = t.seg - 1;
    const size_t len = static_cast<size_t>(std::min<uint64_t>(kChunk, t.end));
    if (!Read(seg, t.end - len, len, buf)) return true;  // from where it was
    t.end -= len;
    scanned += len;
    for (size_t pos = buf.size(); pos > 0;) {
      const void* nl = memrchr(buf.data(), '\n', pos);
      if (nl == nullptr) break;
      const size_t i = static_cast<size_t>(static_cast<const char*>(nl) - buf.data());
      // A line starts right after this newline, unless the stream ends here.
      if (i + 1 < buf.size() || t.any_after) {
        std::string start = buf.substr(i + 1, kPrefix);
        if (start.size() < kPrefix) start += t.later.substr(0, kPrefix - start.size());
        std::string_view view = start;  // Keep trims the view it is given
        if (Keep(query_.rank, view) && ++t.found == want) {
          seg_ = seg;
          off_ = t.end + i + 1;
          return true;
        }
      }
      pos = i;
    }
    t.later = (buf.substr(0, kPrefix) + t.later).substr(0, kPrefix);
    t.any_after = t.any_after || !buf.empty();
  }
  // The first line starts at the very beginning; with fewer than N kept
  // lines in all, everything is shown.
  seg_ = 0;
  off_ = 0;
  return true;
}

bool LogCursor::NothingLeft() const {
  // A torn line held waits for the next snapshot while whole lines are asked.
  if (!carry_.empty() && !query_.whole_lines) return false;
  for (size_t i = seg_; i < segs_.size(); ++i) {
    if (segs_[i].size > (i == seg_ ? off_ : 0)) return false;
  }
  return true;
}

bool LogCursor::Next(std::string* chunk) {
  chunk->clear();
  if (!positioned_) {
    if (query_.tail > 0 && !SeekToTail()) return true;  // more to look at first
    positioned_ = true;
    seek_.reset();
  }
  // Sized once: a replay may hold a chunk while its client does not read,
  // so it holds what it read, not twice that from growing by doubling.
  uint64_t left = 0;
  for (size_t i = seg_; i < segs_.size(); ++i) {
    left += segs_[i].size - (i == seg_ ? std::min(off_, segs_[i].size) : 0);
  }
  chunk->reserve(static_cast<size_t>(std::min<uint64_t>(kChunk, left)) + carry_.size());
  std::string buf;
  auto show = [&](std::string_view line) {
    if (Show(line, chunk)) chunk->push_back('\n');
  };
  uint64_t scanned = 0;
  while (seg_ < segs_.size()) {
    // Read and nothing shown (filtered out, or a line still being put
    // together): the caller's thread back now, the rest on the next call.
    if (scanned >= kScanBytes && !NothingLeft()) return true;
    const uint64_t size = segs_[seg_].size;
    if (off_ >= size) {
      ++seg_;
      off_ = 0;
      continue;
    }
    const size_t len = static_cast<size_t>(std::min<uint64_t>(kChunk, size - off_));
    if (!Read(seg_, off_, len, buf)) {
      seg_ = segs_.size();  // the file shrank under us: stop there
      break;
    }
    off_ += len;
    scanned += len;
    // Lines are shown from `buf` where they lie; only a line split by the
    // chunk's end is kept (carry_), so a cursor between reads holds a part
    // of one line, not a chunk.
    size_t start = 0;
    size_t nl = buf.find('\n');
    if (!carry_.empty()) {
      carry_.append(buf, 0, nl == std::string::npos ? buf.size() : nl);
      if (nl == std::string::npos) continue;
      show(carry_);
      start = nl + 1;
      nl = buf.find('\n', start);
    }
    for (; nl != std::string::npos; start = nl + 1, nl = buf.find('\n', start)) {
      show(std::string_view(buf.data() + start, nl - start));
    }
    carry_ = buf.substr(start);
    if (!chunk->empty()) return true;
  }
  if (!carry_.empty() && !query_.whole_lines) {
    Show(carry_, chunk);
    carry_.clear();
    return !chunk->empty();
  }
  return false;
}

bool LogCursor::Show(std::string_view line, std::string* out) {
  if (query_.stored) {
    out->append(line);
    return true;
  }
  const std::string_view stamp = StampOf(line);
  if (!stamp.empty()) {
    last_stamp_.assign(stamp);
    last_stamp_.back() = 'Z';  // stderr's "z" reads as any other
  }
  if (!query_.since.empty() && !last_stamp_.empty() && last_stamp_ < query_.since) return false;
  if (!Keep(query_.rank, line)) return false;
  if (query_.timestamps && !stamp.empty()) out->append(last_stamp_).push_back(' ');
  out->append(line);
  return true;
}

void ReadLog(LogSnapshot snapshot, const LogQuery& query,
             const std::function<bool(std::string_view)>& sink) {
  LogCursor cursor(std::move(snapshot), query);
  for (std::string chunk; cursor.Next(&chunk);) {
    if (!chunk.empty() && !sink(chunk)) return;
  }
}

}  // namespace ltd
