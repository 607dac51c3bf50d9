// A job's output on disk: every rank's lines, each stored once, as
// "TIME [R] line\n" (TIME: when the line reached its supervisor, see
// LogStamp; logs of older releases have "[R] line\n", read as well),
// bounded per job. Past the bound ltd keeps the head and the
// tail and says how much it cut between them (a rank running `yes` must
// not fill the disk):
//
//   log.head       the first half of the bound, whole lines
//   log.tail.N     the rest, in files of a quarter of the bound each; only
//                  the newest two are kept, so the tail holds at least the
//                  last quarter and at most the last half
//   log.cut        how many bytes and lines were dropped between head and
//                  tail, and the first tail file kept ("BYTES LINES FIRST";
//                  LINES "-" where a dropped file was written by an
//                  earlier attempt and its lines were not counted); written
//                  before the file it counts is unlinked
//
// Each stored line is "TIME [R] line" (LogStamp; stderr marked there).
// Readers see one stream: head, a marker line if anything was cut, tail.
// The writer only ever appends to the newest file and unlinks the oldest,
// so a reader that opened the files at one moment reads exactly what was
// there then, however far the writer has gone since.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "fd.h"
#include "job.h"

namespace ltd {

class JobLogWriter {
 public:
  // Opens (or continues, for a job's next attempt) the log in `dir`.
  static absl::StatusOr<JobLogWriter> Open(const std::string& dir, uint64_t max_bytes);

  // Whole lines. A disk that refuses them loses them, never stalls the loop.
  void Append(std::string_view lines);
  // Every byte ever appended: the logical end of the log.
  uint64_t written() const { return written_; }

  JobLogWriter(JobLogWriter&&) = default;
  JobLogWriter& operator=(JobLogWriter&&) = default;

 private:
  JobLogWriter(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_(max_bytes) {}
  void Rotate();
  void WriteCut();

  std::string dir_;
  uint64_t max_;
  Fd head_;
  uint64_t head_size_ = 0;
  bool head_full_ = false;
  Fd tail_;
  uint64_t tail_seq_ = 0;
  uint64_t tail_size_ = 0;
  uint64_t prev_tail_size_ = 0;
  bool has_prev_ = false;  // a tail before the current one is on disk
  // Lines of the tail files, counted as they are written; none: a file an
  // earlier attempt wrote (not read again to count them).
  std::optional<uint64_t> tail_lines_ = 0;
  std::optional<uint64_t> prev_tail_lines_;
  uint64_t cut_ = 0;
  std::optional<uint64_t> cut_lines_ = 0;  // none: not known
  uint64_t written_ = 0;
};

// When a line reached ltd, as the log keeps it before the line: RFC 3339
// in UTC with microseconds and a space ("2026-12-01T17:02:03.123456Z "),
// fixed width, so that comparing two as text compares the times.
// A line the rank wrote to stderr has "z" for the "Z" (RFC 3339 allows
// either), so that an attach reading the log prints it to stderr again;
// readers show "Z" for both.
inline constexpr size_t kLogStampBytes = 28;
std::string LogStamp(WallTime t);
inline void MarkStderr(std::string& stamp) {
  if (stamp.size() == kLogStampBytes) stamp[kLogStampBytes - 2] = 'z';
}
// The rank a supervisor gives a line of ltd's for the job's users that the
// job's log holds too, stored as "TIME [ltd] TEXT" (a --signal sent, a
// hold, a restart): a reader of the log (an attach, `logs -f`) has it from
// there, so it is not told it again; ltrun prints it as any notice (-1).
inline constexpr int kLoggedNoticeRank = -3;
// The stamp a stored line starts with (without its space), or "".
std::string_view StampOf(std::string_view line);
// Whether a stored line was the rank's stderr.
bool StoredStderr(std::string_view line);

// What `ltctl logs` asks for.
struct LogQuery {
  int rank = -1;            // -1: every rank, lines kept as "[R] line"
  int64_t tail = 0;         // only the last N lines; 0: all
  bool timestamps = false;  // each line after its LogStamp, as stored ("TIME [R] line")
  // Only lines stamped at or after this LogStamp (without its space); "":
  // all. A line without a stamp (an older log) counts as the one before it.
  std::string since;
  // A last line without its newline (still being written) is held back,
  // and position() stops before it, for the next cursor to read whole.
  bool whole_lines = false;
  // Every line as stored, stamp, rank and all (an attach parses them); the
  // other fields but whole_lines do not apply.
  bool stored = false;
};

// The files of a log as they were at one moment, open: the writer may go
// on and rotate, but what was there stays readable, and nothing written
// later is read. Cheap; taken on the loop thread, between appends.
struct LogSnapshot {
  struct File {
    Fd fd;
    uint64_t size = 0;
  };
  std::vector<File> files;            // head, then tails oldest first
  uint64_t cut = 0;                   // dropped between the head and the first tail
  std::optional<uint64_t> cut_lines;  // the lines of them, when known
  // Which log this is: the head's inode (0: no log yet). The same log keeps
  // it across restarts of ltd; a pruned job's or a replaced state dir's
  // new log has another.
  uint64_t id = 0;
  // Where the last whole line of the log ends (every byte written counts).
  uint64_t LastLineEnd() const;
  // Where its last byte ends, a line being written too; no I/O.
  uint64_t End() const;
  static LogSnapshot Take(const std::string& dir);
};

// Reads a snapshot a chunk at a time, so that a reader sends as fast as its
// client takes it and holds one chunk at most, whatever the log's size.
// Blocking file I/O: call Next off the loop. For one rank, lines are
// filtered and stripped of "[R] "; with a tail, only the last N lines kept
// (found by counting backwards, without holding them).
// A LogCursor's search backwards for the last lines of a tail, between
// its calls: in its segment `seg - 1` (none left at 0), the bytes before
// `end` are still to look at. (Outside LogCursor: clang takes a nested
// struct with member initialisers for not default-constructible inside
// the class that holds it in an optional.)
struct LogTailSeek {
  size_t seg = 0;
  uint64_t end = 0;
  uint64_t found = 0;      // kept lines after that point
  std::string later;       // the first bytes after it
  bool any_after = false;  // whether anything comes after it at all
};

class LogCursor {
 public:
  // From the start (or the last `query.tail` lines), or, following a log
  // as it grows, from `from`, a position() of an earlier cursor.
  LogCursor(LogSnapshot snapshot, LogQuery query, std::optional<uint64_t> from = std::nullopt);
  LogCursor(LogCursor&&) = default;
  // The next chunk of whole lines (at most ~64 KiB, the last line may lack
  // its newline); false at the end. A call reads at most kScanBytes of the
  // log (a line longer than that aside): where a filter (--rank, --since)
  // or a tail's search backwards shows nothing of them, it returns true
  // with an empty chunk, and the next call goes on, so that a caller on a
  // shared thread pool gives the thread back between them.
  bool Next(std::string* chunk);
  static constexpr uint64_t kScanBytes = 1 << 20;
  // Whether Next() has nothing to read and nothing to return: every byte
  // of the snapshot past the position was returned, and no part of a line
  // is held to be returned. Reads nothing.
  bool NothingLeft() const;
  // How far into the log (every byte ever written counts, cut ones too)
  // the chunks returned so far reach.
  uint64_t position() const;

 private:
  struct Segment {
    int fd = -1;  // -1: `text` instead (the cut marker)
    uint64_t size = 0;
    std::string text;
    uint64_t logical = 0;  // where it starts in the log; the marker: where the tail does
  };
  bool Read(size_t seg, uint64_t off, size_t len, std::string& out) const;
  // Appends what the query shows of a stored line (no newline); false: none.
  bool Show(std::string_view line, std::string* out);
  // Goes on looking backwards for the tail's start, at most kScanBytes a
  // call; true once forward reading is placed there.
  bool SeekToTail();

  LogSnapshot snapshot_;  // owns the fds the segments read
  LogQuery query_;
  std::vector<Segment> segs_;
  size_t seg_ = 0;  // where forward reading is
  uint64_t off_ = 0;
  bool positioned_ = false;
  std::optional<LogTailSeek> seek_;
  std::string carry_;       // a line split by a chunk
  std::string last_stamp_;  // of the last line read, for --since
};

// All of it to `sink` (false: stop). For tests and small logs.
void ReadLog(LogSnapshot snapshot, const LogQuery& query,
             const std::function<bool(std::string_view)>& sink);

// The marker a reader sees where bytes were cut: "[ltd] L lines (B bytes)
// of output cut here: ...", or "[ltd] B bytes of output ..." when the
// lines are not known.
std::string CutMarker(uint64_t cut, std::optional<uint64_t> lines = std::nullopt);
// What the marker line `line` (without "[ltd] ") says was cut ("L lines
// (B bytes)", "B bytes"), or "" when it is no marker.
std::string CutOfMarker(std::string_view line);

}  // namespace ltd
