// How ltctl shows jobs to people: `ps` tables and `show` pages, drawn from
// the typed job messages ltd sends. Every text from a job (command, name,
// messages, stacks) is escaped, so that no job can drive the terminal.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "ltd.pb.h"

namespace ltd {

// `truncate`: each command cut to fit the table (`ps --no-trunc`: whole).
void PrintJobTable(const std::vector<v1::Job>& jobs, FILE* out, bool truncate = true);
void PrintJob(const v1::Job& job, FILE* out);
// The job's command as ps and show print it: its label, else its argv.
std::string CommandText(const v1::Job& job);
// `ltctl gpus`: every device slot, free, busy or quarantined.
void PrintSlots(const v1::GpusReply& reply, FILE* out);
// RFC 3339 UTC, with at most microseconds ("2026-12-03T15:00:00.123456Z").
std::string TimeText(const google::protobuf::Timestamp& t);
// A hung job's report in a few lines for an attached client: the culprit
// (the rank outside a collective, else the first stalled), the top of its
// stack, and where the rest is (`ltctl show N`). Empty without a report.
std::vector<std::string> HangSummary(const v1::Job& job);
// "rank 2 exited with code 3" and the like, for one-line outcomes.
std::string DescribeCause(const v1::RootCause& cause);

// The pieces of a `show` page, for its parts in other files.
namespace render {
// One line of a job's text, safe for a terminal; "-" for none.
std::string Line(const std::string& text);
// TimeText, or "-" for none.
std::string Time(bool has, const google::protobuf::Timestamp& t);
// The number, or "-" for none.
template <typename T>
std::string Opt(bool has, T value) {
  return has ? std::to_string(value) : "-";
}
}  // namespace render

}  // namespace ltd
