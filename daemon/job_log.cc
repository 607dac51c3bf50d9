#include "job_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include "absl/strings/numbers.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

constexpr char kHead[] = "log.head";
constexpr char kTailPrefix[] = "log.tail.";
constexpr char kCut[] = "log.cut";
constexpr size_t kChunk = 64 * 1024;

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
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return seqs;
  while (dirent* e = readdir(d)) {
    std::string_view name(e->d_name);
    uint64_t seq = 0;
    if (name.starts_with(kTailPrefix) &&
        absl::SimpleAtoi(std::string(name.substr(sizeof kTailPrefix - 1)), &seq)) {
      seqs.push_back(seq);
    }
  }
  closedir(d);
  std::sort(seqs.begin(), seqs.end());
  return seqs;
}

uint64_t ReadCut(const std::string& dir) {
  uint64_t cut = 0;
  if (FILE* f = fopen((dir + "/" + kCut).c_str(), "re")) {
    unsigned long long v = 0;
    if (fscanf(f, "%llu", &v) == 1) cut = v;
    fclose(f);
  }
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

// One piece of the logical stream: a file's first `size` bytes, or text.
struct Segment {
  int fd = -1;
  uint64_t size = 0;
  std::string text;
};

std::vector<Segment> Segments(const LogSnapshot& snap) {
  std::vector<Segment> segs;
  for (size_t i = 0; i < snap.files.size(); ++i) {
    if (i == 1 && snap.cut > 0) segs.push_back({-1, 0, CutMarker(snap.cut)});
    segs.push_back({snap.files[i].fd.get(), snap.files[i].size, {}});
  }
  return segs;
}

// Reads [off, off+len) of a segment into `out`; false on an I/O error.
bool ReadSegment(const Segment& seg, uint64_t off, size_t len, std::string& out) {
  out.resize(len);
  if (seg.fd < 0) {
    out.assign(seg.text, off, len);
    return true;
  }
  size_t got = 0;
  while (got < len) {
    const ssize_t n =
        pread(seg.fd, out.data() + got, len - got, static_cast<off_t>(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return got == len;
}

uint64_t SegmentSize(const Segment& seg) { return seg.fd < 0 ? seg.text.size() : seg.size; }

// Whether a stored line belongs to `rank` (marker lines belong to all);
// `line` is then what to show.
bool Keep(int rank, std::string_view& line) {
  if (rank < 0) return true;
  if (line.starts_with("[ltd]")) return true;
  const std::string prefix = Cat("[", rank, "] ");
  if (!line.starts_with(prefix)) return false;
  line.remove_prefix(prefix.size());
  return true;
}

}  // namespace

std::string CutMarker(uint64_t cut) {
  return Cat("[ltd] ", cut,
             " bytes of output cut here: the job printed more than ltd keeps "
             "(--job-max-log-bytes); the head and the tail are kept\n");
}

absl::StatusOr<JobLogWriter> JobLogWriter::Open(const std::string& dir, uint64_t max_bytes) {
  JobLogWriter w(dir, std::max<uint64_t>(max_bytes, 4 * kChunk));
  w.head_ = OpenAppend(dir + "/" + kHead);
  if (!w.head_.valid()) {
    return absl::UnavailableError(Cat("open(", dir, "/", kHead, "): ", std::strerror(errno)));
  }
  w.head_size_ = FileSize(w.head_.get());
  w.cut_ = ReadCut(dir);
  const std::vector<uint64_t> seqs = TailSeqs(dir);
  w.written_ = w.head_size_ + w.cut_;
  if (!seqs.empty()) {
    // An earlier attempt got as far as the tail: go on there.
    w.head_full_ = true;
    w.tail_seq_ = seqs.back();
    w.tail_ = OpenAppend(Cat(dir, "/", kTailPrefix, w.tail_seq_));
    w.tail_size_ = w.tail_.valid() ? FileSize(w.tail_.get()) : 0;
    if (seqs.size() > 1) {
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
}

void JobLogWriter::Rotate() {
  if (tail_.valid()) {
    // The one before the current goes: that is the cut.
    if (tail_seq_ > 0 && unlink(Cat(dir_, "/", kTailPrefix, tail_seq_ - 1).c_str()) == 0) {
      cut_ += prev_tail_size_;
      WriteCut();
    }
    prev_tail_size_ = tail_size_;
    ++tail_seq_;
  }
  tail_size_ = 0;
  tail_ = OpenAppend(Cat(dir_, "/", kTailPrefix, tail_seq_));
  if (!tail_.valid()) spdlog::warn("log {}: {}", dir_, std::strerror(errno));
}

void JobLogWriter::WriteCut() {
  const std::string path = dir_ + "/" + kCut;
  const std::string tmp = path + ".tmp";
  Fd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return;
  WriteAll(fd.get(), Cat(cut_, "\n"));
  if (rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
}

LogSnapshot LogSnapshot::Take(const std::string& dir) {
  LogSnapshot snap;
  auto add = [&](const std::string& path) {
    Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) return;
    const uint64_t size = FileSize(fd.get());
    snap.files.push_back({std::move(fd), size});
  };
  add(dir + "/" + kHead);
  const std::vector<uint64_t> seqs = TailSeqs(dir);
  for (size_t i = seqs.size() > 2 ? seqs.size() - 2 : 0; i < seqs.size(); ++i)
    add(Cat(dir, "/", kTailPrefix, seqs[i]));
  snap.cut = ReadCut(dir);
  return snap;
}

void ReadLog(LogSnapshot snapshot, const LogQuery& query,
             const std::function<bool(std::string_view)>& sink) {
  const std::vector<Segment> segs = Segments(snapshot);
  std::string buf;
  if (query.tail <= 0) {
    // Forward, a chunk at a time; lines split by a chunk carry over.
    std::string carry, out;
    for (const Segment& seg : segs) {
      const uint64_t size = SegmentSize(seg);
      for (uint64_t off = 0; off < size;) {
        const size_t len = static_cast<size_t>(std::min<uint64_t>(kChunk, size - off));
        if (!ReadSegment(seg, off, len, buf)) return;
        off += len;
        if (query.rank < 0 && carry.empty()) {
          if (!sink(buf)) return;
          continue;
        }
        carry.append(buf);
        size_t start = 0;
        out.clear();
        for (size_t nl; (nl = carry.find('\n', start)) != std::string::npos; start = nl + 1) {
          std::string_view line(carry.data() + start, nl - start);
          if (Keep(query.rank, line)) out.append(line).push_back('\n');
        }
        carry.erase(0, start);
        if (!out.empty() && !sink(out)) return;
      }
    }
    std::string_view last(carry);
    if (!last.empty() && Keep(query.rank, last)) sink(last);
    return;
  }
  // The last N lines: backwards from the end until N of them are kept.
  // `pending` is what has been read but not cut into lines yet; it always
  // ends where a line ends.
  std::deque<std::string> kept;
  std::string pending;
  const auto want = static_cast<size_t>(query.tail);
  // Takes the last line of `pending` if its start is known: after a
  // newline, or the start of the stream.
  auto take_last = [&](bool at_start) -> bool {
    if (pending.empty()) return false;
    const size_t body_end = pending.size() - (pending.back() == '\n' ? 1 : 0);
    const size_t prev = body_end == 0 ? std::string::npos : pending.rfind('\n', body_end - 1);
    if (prev == std::string::npos && !at_start) return false;
    const size_t begin = prev == std::string::npos ? 0 : prev + 1;
    std::string_view line(pending.data() + begin, body_end - begin);
    if (Keep(query.rank, line)) kept.emplace_front(std::string(line) + "\n");
    pending.resize(begin);
    return true;
  };
  for (size_t s = segs.size(); s-- > 0 && kept.size() < want;) {
    const Segment& seg = segs[s];
    for (uint64_t end = SegmentSize(seg); end > 0 && kept.size() < want;) {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(kChunk, end));
      if (!ReadSegment(seg, end - len, len, buf)) return;
      end -= len;
      pending.insert(0, buf);
      while (kept.size() < want && take_last(false)) {
      }
    }
  }
  while (kept.size() < want && take_last(true)) {
  }
  std::string out;
  for (const std::string& line : kept) {
    out.append(line);
    if (out.size() >= kChunk) {
      if (!sink(out)) return;
      out.clear();
    }
  }
  if (!out.empty()) sink(out);
}

}  // namespace ltd
