// Every value a node reads of a multi-node run from etcd, where anyone who
// can reach etcd can write (rdzv/run_keys.h, rdzv/fence_values.h): the
// members (nodes/<r>), node 0's master, the nodes' states and causes
// (status/<r>), and each attempt's reports, vanished nodes and verdict
// with their hang evidence. Invariants: a key names a node of the run or
// nothing; a value speaks only for its key's node; text is one bounded
// line; a cause read is written into the job's record (valid UTF-8).
#include <nlohmann/json.hpp>

#include "fence_values.h"
#include "fuzz_check.h"
#include "run_keys.h"

using namespace ltd;
using namespace ltd::rdzv;

namespace {

constexpr size_t kText = 256 + 32;  // JsonText's bound and its elision mark

void CheckCause(const RootCause& c, size_t max = 4096) {
  FUZZ_CHECK(c.message.size() <= max);
  FUZZ_CHECK(c.cancelled_by.size() <= std::min<size_t>(256, max));
  (void)ToJson(c).dump();  // throws on invalid UTF-8: must not
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const int nnodes = in.Byte() % 8 + 1;
  const int devices = in.Byte() % 8 + 1;
  const int64_t revision = in.Byte();
  const std::string prefix = "/ltd/runs/r1/";
  const std::string rest(in.Field('\n'));
  const std::string value(in.Rest());

  if (const auto m = ParseMember(prefix, prefix + rest, value, nnodes)) {
    FUZZ_CHECK(m->rank >= 0 && m->rank < nnodes);
    FUZZ_CHECK(rest == "nodes/" + std::to_string(m->rank));  // one key a node
    FUZZ_CHECK(fuzz::IsOneLine(m->host, kText));
    FUZZ_CHECK(m->nnodes >= 0 && m->devices >= 0 && m->fence >= 0);
  }
  const nlohmann::json j = nlohmann::json::parse(value, nullptr, false);
  if (const auto master = ParseMaster(j)) {
    FUZZ_CHECK(!master->addr.empty() && master->addr.size() <= 253);
    FUZZ_CHECK(fuzz::IsOneLine(master->addr, 253));
    FUZZ_CHECK(master->port >= 1 && master->port <= 65535);
  }
  NodeStatus n;
  n.host = "before";
  // A table of up to 65,536 nodes: each node's texts get their share.
  const size_t node_text = NodeTextMax(nnodes << (revision % 16));
  if (ApplyStatus(value, n, node_text)) {
    FUZZ_CHECK(n.state.empty() || ParseJobState(n.state).has_value());
    FUZZ_CHECK(n.host == "before" || fuzz::IsOneLine(n.host, node_text + 32));
    if (n.root_cause) CheckCause(*n.root_cause, node_text);
  } else {
    FUZZ_CHECK(n.host == "before" && n.state.empty());
  }
  if (const auto v = ParseAttempt(rest, value, revision, nnodes, devices)) {
    const NodeReport& r = v->report;
    FUZZ_CHECK(v->attempt >= 0);
    FUZZ_CHECK(r.node >= 0 && r.node < nnodes && r.cause.node == r.node);
    FUZZ_CHECK(r.order == revision);
    FUZZ_CHECK(fuzz::IsOneLine(r.what, kText) && fuzz::IsOneLine(v->note, kText));
    if (!v->verdict) {
      // The key's node, whatever the value says.
      FUZZ_CHECK(rest.ends_with("/" + std::to_string(r.node)));
    }
    CheckCause(r.cause);
    if (r.hang) {
      FUZZ_CHECK(r.hang->size() <= static_cast<size_t>(devices));
      for (const HangReportRank& h : *r.hang) {
        FUZZ_CHECK(h.node == r.node && h.rank >= 0 && h.rank < devices);
      }
    }
  }
  return 0;
}
