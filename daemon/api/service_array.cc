// The service's calls about a whole array (`ltctl kill 12`, `show 12`,
// with 12 an array's id or its name): each of its tasks is a job of its
// own, acted on or shown one by one.
#include <memory>

#include "api_convert.h"
#include "bytes.h"
#include "service.h"
#include "str_util.h"

namespace ltd {

absl::Status LtdService::KillArray(const std::vector<const Job*>& tasks, KillOrder order,
                                   const PeerCreds& who, v1::KillReply* reply,
                                   grpc::ServerUnaryReactor* reactor) {
  const std::string array = tasks.front()->spec.array.job_id;
  // Pending tasks first, so that a running one's end starts none of those
  // about to be cancelled; the ids, not the jobs: a task's end may prune
  // another's record from memory.
  std::vector<std::string> pending, running;
  for (const Job* t : tasks) {
    if (who.uid != 0 && who.uid != t->spec.uid) {
      return absl::PermissionDeniedError(
          Cat("array ", array, " belongs to ", t->user, "; only its owner or root may do that"));
    }
    if (IsFinal(t->state)) continue;
    (t->state == JobState::kPending ? pending : running).push_back(t->id);
  }
  // A signal goes to running tasks only: a pending one has no process.
  if (order.signal != 0) pending.clear();
  reply->set_job_id(array);
  reply->set_state(ToProto(tasks.front()->state));
  if (pending.empty() && running.empty()) {
    return absl::FailedPreconditionError(
        order.signal != 0 ? Cat("no task of array ", array, " is running; nothing to signal")
                          : Cat("every task of array ", array, " already ended; `ltctl show ",
                                array, "` says how"));
  }
  struct Count {
    size_t left = 0;
    grpc::ServerUnaryReactor* reactor = nullptr;
  };
  auto count = std::make_shared<Count>(Count{pending.size() + running.size(), reactor});
  // A task that ended meanwhile is no failure of the kill: every task is
  // ended or ending once each answered.
  auto done = [count](absl::Status) {
    if (--count->left == 0) count->reactor->Finish(grpc::Status::OK);
  };
  std::vector<std::string> ids = std::move(pending);
  ids.insert(ids.end(), running.begin(), running.end());
  manager_.KillEach(ids, order, done);
  return absl::OkStatus();
}

void LtdService::ShowArray(const std::vector<const Job*>& tasks, uid_t caller, bool all,
                           v1::Job* reply) {
  // The array's fields are its first task's (they share the spec); its
  // tasks follow in short, at most kMaxArrayTasks.
  View(*tasks.front(), kShowLimits, reply);
  ForCaller(*tasks.front(), caller, all, reply);
  for (const Job* t : tasks) {
    v1::ArrayTaskState* s = reply->add_array_tasks();
    s->set_task_id(t->spec.array.task);
    s->set_job_id(DisplayEscape(t->id));
    s->set_state(ToProto(t->state));
    if (t->exit_code) s->set_exit_code(*t->exit_code);
    if (t->state == JobState::kPending) {
      s->set_pending_reason(
          DisplayEscapeElided(manager_.PendingReason(*t), 256, Controls::kEscape));
    }
  }
}

}  // namespace ltd
