#include "end_report.h"

#include <cstdio>
#include <string>

#include "bytes.h"
#include "hang_report.h"
#include "str_util.h"

namespace ltd {
namespace {

// A rank of a multi-node run: "node 1 rank 0 (global 2)".
std::string RunRank(int node, int rank, int devices) {
  return Cat("node ", node, " rank ", rank, " (global ", node * devices + rank, ")");
}

// A multi-node run's hang report: each node's ranks on a line (step,
// whether it waits in a collective), the nodes that told nothing, then the
// stacks of the ranks that stalled.
void PrintRunHang(const HangReport& report, int devices) {
  if (devices < 1) devices = 1;
  std::string stalled;
  for (int g : report.stalled_ranks) {
    stalled += Cat(stalled.empty() ? "" : ", ", RunRank(g / devices, g % devices, devices));
  }
  std::fprintf(stderr, "ltrun: hang report of the run: stalled first: %s\n",
               stalled.empty() ? "none" : stalled.c_str());
  std::string line;
  int node = -1;
  auto flush = [&] {
    if (!line.empty()) std::fprintf(stderr, "ltrun:   node %d: %s\n", node, line.c_str());
    line.clear();
  };
  for (const HangReportRank& r : report.ranks) {
    if (r.node != node) {
      flush();
      node = r.node;
    }
    const bool taken = StackIsEvidence(r) || r.stack_status == StackStatus::kTaken;
    line += Cat(
        line.empty() ? "" : "; ", "rank ", r.rank, " step ",
        r.last_step >= 0 ? std::to_string(r.last_step) : std::string("-"),
        r.stalled ? " STALLED" : "",
        r.in_collective ? " waits in a collective"
        : taken         ? " outside any collective"
                        : " (stack not taken)",
        r.process_state.empty() ? "" : Cat(" ", DisplayEscape(r.process_state, Controls::kEscape)));
  }
  flush();
  for (const MissingNode& m : report.missing_nodes) {
    const std::string why = DisplayEscape(m.why, Controls::kEscape);
    if (m.node < 0) {
      std::fprintf(stderr, "ltrun:   %s\n", why.c_str());
    } else {
      std::fprintf(stderr, "ltrun:   node %d: %s\n", m.node, why.c_str());
    }
  }
  for (const HangReportRank& r : report.ranks) {
    if (!r.stalled) continue;
    const std::string who = RunRank(r.node, r.rank, devices);
    if (!StackIsEvidence(r)) {
      if (r.stack_status != StackStatus::kUnknown) {
        std::fprintf(stderr, "ltrun: %s's stack is not here (%s%s%s)\n", who.c_str(),
                     std::string(ToString(r.stack_status)).c_str(),
                     r.stack_note.empty() ? "" : ": ",
                     DisplayEscape(r.stack_note, Controls::kEscape).c_str());
      }
      continue;
    }
    std::fprintf(stderr, "ltrun: %s was here:\n%s\n", who.c_str(),
                 DisplayEscape(r.stack, Controls::kKeepNewlines).c_str());
  }
}

}  // namespace

void PrintEnd(const Job& job) {
  std::fflush(stdout);
  if (job.state == JobState::kSucceeded) return;
  std::string why = job.root_cause ? job.root_cause->message : "";
  // The rank that failed, as ltctl names it ("rank 1", "node 1 rank 0"):
  // the message alone may not say which.
  if (const RootCause* c = job.root_cause ? &*job.root_cause : nullptr; c && c->rank >= 0) {
    const std::string who =
        c->node >= 0 ? Cat("node ", c->node, " rank ", c->rank) : Cat("rank ", c->rank);
    if (why.find("rank ") == std::string::npos) why = why.empty() ? who : Cat(who, ": ", why);
  }
  // On one node of several, which node, and the failed rank's global RANK.
  std::string where;
  if (const NodeSpec& nodes = job.spec.nodes; IsMultiNode(nodes) && NodeRankOf(nodes) >= 0) {
    where = Cat(" on node ", NodeRankOf(nodes), " of ", nodes.nnodes);
    const RootCause* cause = job.root_cause ? &*job.root_cause : nullptr;
    if (cause != nullptr && cause->rank >= 0 && cause->node < 0) {
      where += Cat(" (global rank ", NodeRankOf(nodes) * job.spec.devices + cause->rank, ")");
    }
  }
  std::fprintf(stderr, "ltrun: job %s%s: %s (exit code %d)\n",
               std::string(ToString(job.state)).c_str(), where.c_str(),
               DisplayEscape(why, Controls::kEscape).c_str(), job.exit_code.value_or(1));
  if (!job.hang_report) return;
  const HangReport& report = *job.hang_report;
  if (IsRunWide(report)) return PrintRunHang(report, job.spec.devices);
  std::fprintf(stderr, "ltrun: hang report: stalled rank(s) %s%s\n",
               Join(report.stalled_ranks, ",").c_str(),
               report.straggler_ranks.empty()
                   ? ""
                   : Cat("; stragglers ", Join(report.straggler_ranks, ",")).c_str());
  for (const HangReportRank& r : report.ranks) {
    if (!r.stalled) continue;
    if (!StackIsEvidence(r)) {
      // Said, not left out: a verdict without this stack is a weaker one.
      if (r.stack_status != StackStatus::kUnknown) {
        std::fprintf(stderr, "ltrun: rank %d's stack was not taken (%s%s%s)\n", r.rank,
                     std::string(ToString(r.stack_status)).c_str(),
                     r.stack_note.empty() ? "" : ": ",
                     DisplayEscape(r.stack_note, Controls::kEscape).c_str());
      }
      continue;
    }
    std::fprintf(stderr, "ltrun: rank %d was here:\n%s\n", r.rank,
                 DisplayEscape(r.stack, Controls::kKeepNewlines).c_str());
  }
}

}  // namespace ltd
