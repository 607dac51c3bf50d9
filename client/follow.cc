#include "follow.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "bytes.h"
#include "event_pump.h"
#include "rank_console.h"
#include "render.h"
#include "rpc_error.h"
#include "str_util.h"

namespace ltd {
namespace {

// The one console of this process: stdout's buffer is set once, before
// anything is written to it.
RankConsole& Console() {
  static RankConsole console(stdout, stderr);
  return console;
}

// Prints the events of one stream. `prefix`: "[R] " before each rank
// line; `quiet_end`: no line of ltctl's for a job that did not succeed.
class EventPrinter {
 public:
  EventPrinter(bool prefix, bool quiet_end) : quiet_end_(quiet_end) {
    Console().set_prefix(prefix);
  }

  // The job's exit code once `ended` arrives.
  std::optional<int> Print(const v1::JobEvent& ev) {
    RankConsole& console = Console();
    switch (ev.event_case()) {
      case v1::JobEvent::kOutput: {
        const auto& o = ev.output();
        console.Line(o.rank(), o.stderr(), o.data());
        return std::nullopt;
      }
      case v1::JobEvent::kLines:
        for (const v1::OutputLine& o : ev.lines().lines())
          console.Line(o.rank(), o.stderr(), o.data());
        return std::nullopt;
      case v1::JobEvent::kLog:
        console.Raw(ev.log());
        return std::nullopt;
      case v1::JobEvent::kNotice:
        console.Notice(DisplayEscape(ev.notice(), Controls::kEscape));
        return std::nullopt;
      case v1::JobEvent::kPending:
        // As srun says it: the wait is the job's, not a hung ltctl.
        console.Notice(Cat("ltctl: job ", Line(ev.pending().job_id()), " is PENDING (",
                           Line(ev.pending().reason()), "); waiting"));
        pending_ = true;
        return std::nullopt;
      case v1::JobEvent::kStarted:
        if (pending_) console.Notice(Cat("ltctl: job ", Line(ev.started()), " started"));
        pending_ = false;
        return std::nullopt;
      case v1::JobEvent::kEnded: {
        const auto& e = ev.ended();
        if (!quiet_end_ && e.state() != v1::Job::SUCCEEDED) {
          console.Notice(Cat("ltctl: job ", Line(e.job_id()), " ", v1::Job::State_Name(e.state()),
                             ": ", DescribeCause(e.root_cause()), " (exit code ", e.exit_code(),
                             ")"));
          const auto reason = e.root_cause().reason();
          hung_ = reason == v1::RootCause::hang || reason == v1::RootCause::startup_timeout;
        }
        return e.exit_code();
      }
      default:  // an event of a later ltd
        return std::nullopt;
    }
  }

  // The job ended hung (and the end was said): its report is worth a look.
  bool hung() const { return hung_; }

 private:
  static std::string Line(const std::string& text) {
    return DisplayEscape(text, Controls::kEscape);
  }
  const bool quiet_end_;
  bool pending_ = false;
  bool hung_ = false;
};

// Prints a whole stream; the job's exit code, or 0 for a stream that
// carries none (`logs`).
int Drain(const Globals& g, grpc::ClientReaderInterface<v1::JobEvent>& reader, bool prefix,
          bool quiet_end = false) {
  EventPrinter printer(prefix, quiet_end);
  std::optional<int> code;
  grpc::Status s = PumpEvents(
      reader,
      [&](const v1::JobEvent& ev) {
        if (auto c = printer.Print(ev)) code = c;
      },
      [] { Console().Idle(); });
  if (!s.ok()) DieRpc(g, s);
  return code.value_or(0);
}

// How long an attached ltctl waits for a restarting ltd (its jobs live on
// meanwhile under their supervisors).
constexpr auto kReconnectFor = std::chrono::minutes(10);

// After a stream broke because ltd went away: waits, bounded, until ltd
// accepts connections again (its jobs live on meanwhile). `say`: tell the
// user once; `resume`: the verb to run by hand should ltd not come back.
void WaitForLtd(const Globals& g, bool say, const std::string& resume) {
  if (say) {
    // Not gRPC's words for it ("Cancelling all calls", "Socket closed").
    Console().Notice("ltctl: lost ltd (it stopped or restarted); waiting for it to come back");
  }
  const auto deadline = std::chrono::steady_clock::now() + kReconnectFor;
  // A stopping ltd may still accept for a moment: wait for it to go first.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  while (TryConnect(g.socket) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      Die("ltd did not come back within 10 minutes; its jobs may still run: `ltctl " + resume +
          "` once it is back");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// A hung job's report in short, after its end line; nothing when ltd
// cannot say now (the end line said what matters).
void PrintHangSummary(const Globals& g, const std::string& id) {
  int gone = 0;
  auto api = Connect(g, &gone);
  if (api == nullptr) return;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::JobRef req;
  req.set_job(id);
  v1::Job job;
  if (!api->Show(&ctx, req, &job).ok()) return;
  for (const std::string& line : HangSummary(job)) Console().Notice(Cat("ltctl: ", line));
}

// Opens a job's stream again, from `at` when a stream before reached it.
using Opener = std::function<std::unique_ptr<grpc::ClientReaderInterface<v1::JobEvent>>(
    v1::Ltd::Stub&, grpc::ClientContext&, const std::optional<v1::LogPosition>& at)>;

// Prints job `id`'s stream to its end through restarts of ltd: one that
// breaks because ltd went away is opened again once ltd is back, from the
// place in the job's log (the `at` of its events) the last event printed
// reached, so nothing is missed or printed twice. `first`: the stream
// already open; `at`: where it starts, when known. `what`: the stream, as
// the user is told it goes on; `resume`: the verb to run by hand should
// ltd not come back. The job's exit code, or 0 for a stream without it.
int PrintThroughRestarts(const Globals& g, const std::string& id, EventPrinter& printer,
                         const Opener& open, grpc::ClientReaderInterface<v1::JobEvent>* first,
                         std::optional<v1::LogPosition> at, const std::string& what,
                         const std::string& resume) {
  std::unique_ptr<v1::Ltd::Stub> api;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReaderInterface<v1::JobEvent>> owned;
  grpc::ClientReaderInterface<v1::JobEvent>* reader = first;
  for (bool again = false;; again = true) {
    if (reader == nullptr) {
      // After a restart, ltd may go again between its answer to
      // WaitForLtd and this connect: then wait again, not end as if no
      // ltd had ever run (as a first connect that fails does).
      int gone = 0;
      api = again ? Connect(g, &gone) : Connect(g);
      if (api == nullptr) {
        WaitForLtd(g, /*say=*/false, resume);
        continue;
      }
      ctx = std::make_unique<grpc::ClientContext>();
      owned = open(*api, *ctx, at);
      reader = owned.get();
    }
    std::optional<int> code;
    bool first_event = true;
    grpc::Status s = PumpEvents(
        *reader,
        [&](const v1::JobEvent& ev) {
          if (again && first_event) {
            Console().Notice(Cat("ltctl: ltd is back; following ", what, " again"));
          }
          first_event = false;
          if (auto c = printer.Print(ev)) code = c;
          if (ev.has_at()) {
            const uint64_t log_id = at && ev.at().log_id() == 0 ? at->log_id() : ev.at().log_id();
            at = ev.at();
            at->set_log_id(log_id);
          }
        },
        // As `tail -f`: out as it comes, into a pipe or file too.
        [] { Console().Idle(); });
    if (code) return *code;
    if (s.ok()) return 0;
    if (again && s.error_code() == grpc::StatusCode::NOT_FOUND) {
      FlushConsole();
      Die("job " + id +
          " is gone from ltd (pruned while ltd was away); its output past the last "
          "line printed here cannot be shown");
    }
    if (!LostLtd(s)) {
      FlushConsole();  // what was printed, before why it stops
      DieRpc(g, s);
    }
    WaitForLtd(g, /*say=*/!again || !first_event, resume);
    reader = nullptr;
  }
}

}  // namespace

int FollowThroughRestarts(const Globals& g, const std::string& id, bool output, bool quiet_end,
                          grpc::ClientReaderInterface<v1::JobEvent>* first,
                          std::optional<v1::LogPosition> at) {
  EventPrinter printer(/*prefix=*/true, quiet_end);
  if (first != nullptr && !at) at.emplace();  // an attached submit's: from the start
  const int code = PrintThroughRestarts(
      g, id, printer,
      [&](v1::Ltd::Stub& api, grpc::ClientContext& ctx, const std::optional<v1::LogPosition>& at) {
        v1::JobRef req;
        req.set_job(id);
        req.set_batched(true);
        if (output && at) *req.mutable_from() = *at;
        return output ? api.Attach(&ctx, req) : api.Wait(&ctx, req);
      },
      first, at, "job " + id, "attach " + id);
  if (printer.hung()) PrintHangSummary(g, id);
  return code;
}

int Logs(const Globals& g, const std::string& job, int rank, bool follow, int64_t tail,
         const v1::LogsRequest& filters) {
  if (tail < 0) Die("--tail must be >= 0");
  if (!follow) {
    auto api = Connect(g);
    grpc::ClientContext ctx;
    v1::LogsRequest req = filters;
    req.set_job(job);
    req.set_rank(rank);
    req.set_tail(tail);
    auto reader = api->Logs(&ctx, req);
    Drain(g, *reader, /*prefix=*/rank < 0, /*quiet_end=*/true);
    return 0;
  }
  // By id, so that no name can change jobs between streams. The first
  // stream starts at the log's start or its last `tail` lines; one opened
  // again, where the last printed ended.
  const std::string id = JobId(g, job);
  EventPrinter printer(/*prefix=*/rank < 0, /*quiet_end=*/true);
  return PrintThroughRestarts(
      g, id, printer,
      [&](v1::Ltd::Stub& api, grpc::ClientContext& ctx, const std::optional<v1::LogPosition>& at) {
        v1::LogsRequest req = filters;
        req.set_job(id);
        req.set_rank(rank);
        req.set_follow(true);
        if (at) {
          *req.mutable_from() = *at;
        } else {
          req.set_tail(tail);
        }
        return api.Logs(&ctx, req);
      },
      nullptr, std::nullopt, "the log of job " + id, "logs -f " + id);
}

void FlushConsole() { Console().Idle(); }

int WaitArray(const Globals& g, const v1::Job& a) {
  int worst = 0;
  for (const v1::ArrayTaskState& task : a.array_tasks()) {
    // An ended task's code is in the reply; a live one is waited for as
    // ARRAY_TASK (the first task's job id is the array's, which names the
    // whole array), through restarts of ltd as any wait.
    const bool ended = task.state() != v1::Job::PENDING && task.state() != v1::Job::RUNNING &&
                       task.state() != v1::Job::STARTING &&
                       task.state() != v1::Job::STATE_UNSPECIFIED;
    const int code = ended && task.has_exit_code()
                         ? task.exit_code()
                         : FollowThroughRestarts(g, Cat(a.array_job_id(), "_", task.task_id()),
                                                 /*output=*/false, /*quiet_end=*/true, nullptr);
    worst = std::max(worst, code);
  }
  return worst;
}

}  // namespace ltd
