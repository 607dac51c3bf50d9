// A job's log as `ltctl logs -f` and an attach read it (store/job_log.h):
// from the files of the state dir (log.head, log.tail.N, and log.cut,
// which says what was cut between them), from the position a client
// sends back (JobRef.from, LogsRequest.from: any number up to the log's
// end passes the service's check), with any query. Invariants: positions
// never go back and never pass the log's end; a chunk stays within its
// bound; a reader that goes on from a position an earlier one reached gets
// exactly what that one got after it; a cursor that says nothing is left
// returns nothing, and stays where it is.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "file_io.h"
#include "fuzz_check.h"
#include "job_log.h"

using namespace ltd;

namespace {

const std::string& Dir() {
  static const std::string dir = [] {
    char d[] = "/tmp/ltd-fuzz-log.XXXXXX";
    if (mkdtemp(d) == nullptr) std::abort();
    static std::string kept = d;
    std::atexit([] {
      for (const char* f : {"log.head", "log.cut", "log.tail.0", "log.tail.1", "log.tail.2"})
        unlink((kept + "/" + f).c_str());
      rmdir(kept.c_str());
    });
    return kept;
  }();
  return dir;
}

void Put(const std::string& name, std::string_view text, bool present) {
  const std::string path = Dir() + "/" + name;
  if (!present) {
    unlink(path.c_str());
    return;
  }
  FUZZ_CHECK(fuzz::PutFile(path, text));
}

struct Read {
  std::vector<uint64_t> positions;  // after each chunk
  std::vector<std::string> chunks;
};

Read ReadAll(const LogQuery& query, std::optional<uint64_t> from) {
  const LogSnapshot snapshot = LogSnapshot::Take(Dir());
  const uint64_t end = snapshot.End();
  LogCursor cursor(LogSnapshot::Take(Dir()), query, from);
  Read r;
  uint64_t last = 0;
  std::string chunk;
  for (int i = 0; i < 10000; ++i) {
    // A replay skips the read when nothing is left: Next must agree.
    const bool nothing_left = cursor.NothingLeft();
    const uint64_t before = cursor.position();
    const bool more = cursor.Next(&chunk);
    FUZZ_CHECK(!(nothing_left && more));
    FUZZ_CHECK(!nothing_left || cursor.position() == before);
    if (!more) break;
    const uint64_t at = cursor.position();
    FUZZ_CHECK(at >= last && at <= end);
    // ~64 KiB of whole lines, and a line split by a read's end.
    FUZZ_CHECK(chunk.size() <= 2 * 65536 + 4096 + end);
    last = at;
    r.positions.push_back(at);
    r.chunks.push_back(chunk);
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t flags = in.Byte();
  LogQuery query;
  query.rank = static_cast<int>(in.Byte() % 4) - 1;
  query.tail = in.Byte() % 4;
  query.timestamps = flags & 1;
  query.whole_lines = flags & 2;
  query.stored = flags & 4;
  const uint8_t resume_at = in.Byte();
  uint64_t from = in.Number<uint64_t>();
  // The state dir's files, as a hostile or half-written one may hold them.
  Put("log.cut", in.Field('\0'), flags & 8);
  Put("log.head", in.Field('\0'), !(flags & 16));
  Put("log.tail.0", in.Field('\0'), flags & 32);
  Put("log.tail.1", in.Field('\0'), flags & 64);
  Put("log.tail.2", in.Rest(), flags & 128);

  const uint64_t end = LogSnapshot::Take(Dir()).End();
  // What the service lets through (LogReplay::Start): up to the end.
  if (end != UINT64_MAX) from %= end + 1;
  ReadAll(query, from);

  // Following from where an earlier reader got to: the rest, exactly.
  query.tail = 0;
  const Read all = ReadAll(query, std::nullopt);
  if (all.chunks.empty()) return 0;
  const size_t k = resume_at % all.chunks.size();
  const Read rest = ReadAll(query, all.positions[k]);
  std::string want, got;
  for (size_t i = k + 1; i < all.chunks.size(); ++i) want += all.chunks[i];
  for (const std::string& c : rest.chunks) got += c;
  FUZZ_CHECK(got == want);
  return 0;
}
