#include "stack_cmd.h"

#include <chrono>

#include "bytes.h"
#include "job_json.h"

namespace ltd {
namespace {

// Text from ranks, several lines: escaped so that no byte of it can move
// the terminal's cursor.
std::string Lines(const std::string& text) {
  std::string s = DisplayEscape(text, Controls::kKeepNewlines);
  if (!s.empty() && s.back() != '\n') s.push_back('\n');
  return s;
}

}  // namespace

void PrintStacks(const v1::StackReply& reply, FILE* out) {
  for (const v1::RankStack& r : reply.ranks()) {
    std::fprintf(out, "== rank %d (pid %d%s%s%s%s)\n", r.rank(), r.pid(),
                 r.state().empty() ? "" : ", ", DisplayEscape(r.state(), Controls::kEscape).c_str(),
                 r.kind().empty() ? "" : ", ", DisplayEscape(r.kind(), Controls::kEscape).c_str());
    if (!r.note().empty()) std::fprintf(out, "note: %s", Lines(r.note()).c_str());
    if (!r.frames().empty()) std::fputs(Lines(r.frames()).c_str(), out);
    if (!r.kernel().empty()) std::fputs(Lines(r.kernel()).c_str(), out);
  }
  std::fprintf(out, "(took %.2fs of a %.0fs budget)\n", static_cast<double>(reply.took_ms()) / 1000,
               static_cast<double>(reply.budget_ms()) / 1000);
}

int StackCommand(const Globals& g, const std::string& job, std::optional<int> rank) {
  auto api = Connect(g);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::StackRequest req;
  req.set_job(job);
  if (rank) req.set_rank(*rank);
  v1::StackReply reply;
  grpc::Status s = api->Stack(&ctx, req, &reply);
  if (!s.ok()) DieRpc(g, s);
  if (g.json) {
    std::printf(
        "%s\n",
        ToJsonValue(reply).dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    PrintStacks(reply, stdout);
  }
  return 0;
}

}  // namespace ltd
