// How a job's output reaches the user's console in the foreground (an
// attached `ltctl submit`/`attach`, `ltrun`): every rank line as
// `[RANK] line`, stdout lines to stdout and stderr lines to stderr, and
// ltd's own notices on stderr.
//
// Output must be live wherever it goes (a terminal, a pipe, a file that
// `tail -f` or Slurm's srun reads), yet cost one write per burst rather
// than per line. So stdout is buffered, and the caller flushes whenever
// it has nothing more in hand (Idle): a burst of lines is one write, and
// the last line of a burst never waits for the next burst. Each stderr
// line is one write of its own, and a line on one stream first flushes
// what the other holds, so that `2>&1` shows the lines in the order they
// were read.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace ltd {

class RankConsole {
 public:
  // `out`/`err`: where stdout and stderr lines go (tests pass their own).
  // Made before anything is written to `out`, whose buffer it sets.
  // `notice_prefix`: before each notice line ("ltrun: "), or "".
  RankConsole(std::FILE* out, std::FILE* err, std::string notice_prefix = "");
  ~RankConsole();
  RankConsole(const RankConsole&) = delete;
  RankConsole& operator=(const RankConsole&) = delete;

  // Whether lines carry their rank (`logs --rank R` prints them bare).
  void set_prefix(bool on) { prefix_ = on; }
  // One line of rank `rank` (without its newline), as the rank wrote it.
  void Line(int rank, bool is_stderr, std::string_view line);
  // ltd's or the tool's own words, on stderr.
  void Notice(std::string_view text);
  // Bytes to stdout as they are (a stored log's chunk).
  void Raw(std::string_view bytes);
  // Nothing more is in hand right now: whatever is buffered goes out.
  void Idle();

 private:
  std::FILE* out_;
  std::FILE* err_;
  const std::string notice_prefix_;
  bool prefix_ = true;
  bool out_dirty_ = false;  // stdout holds bytes not written yet
  std::string scratch_;     // one stderr line, built whole
};

}  // namespace ltd
