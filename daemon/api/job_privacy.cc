#include "job_privacy.h"

#include <string>

namespace ltd {
namespace {

void Hide(v1::Job* view, const char* path, bool had) {
  if (had) view->add_hidden(path);
}

}  // namespace

void HideOthersDetails(v1::Job* view) {
  Hide(view, "cwd", !view->cwd().empty());
  view->clear_cwd();
  const bool args = view->argv_size() > 1;
  Hide(view, "argv", args);
  if (args) view->mutable_argv()->DeleteSubrange(1, view->argv_size() - 1);
  view->set_argv_truncated(false);
  Hide(view, "output", !view->output().empty());
  view->clear_output();
  Hide(view, "error", !view->error().empty());
  view->clear_error();
  // The command as its client put it has the arguments too.
  Hide(view, "label", !view->label().empty());
  view->clear_label();
  // A refused record's words say what it held and who wrote it.
  Hide(view, "rdzv_refused_last", !view->rdzv_refused_last().empty());
  view->clear_rdzv_refused_last();
  if (view->has_errors()) {
    // The names the ranks gave the files they left in errors/.
    bool names = false;
    for (v1::ErrorsDir::Cut& c : *view->mutable_errors()->mutable_cut()) {
      names |= !c.name().empty();
      c.clear_name();
    }
    Hide(view, "errors.cut.name", names);
  }

  // The cause's kind, rank, code and time stay; its text is the job's.
  auto message = [&](v1::RootCause* c, const char* path) {
    Hide(view, path, !c->message().empty());
    c->clear_message();
  };
  if (view->has_root_cause()) message(view->mutable_root_cause(), "root_cause.message");
  bool attempts = false, nodes = false, ranks = false, stacks = false;
  for (v1::Attempt& a : *view->mutable_attempts()) {
    attempts |= a.has_root_cause() && !a.root_cause().message().empty();
    if (a.has_root_cause()) a.mutable_root_cause()->clear_message();
  }
  Hide(view, "attempts.root_cause.message", attempts);
  for (v1::NodeStatus& n : *view->mutable_nodes()) {
    nodes |= n.has_root_cause() && !n.root_cause().message().empty();
    if (n.has_root_cause()) n.mutable_root_cause()->clear_message();
  }
  Hide(view, "nodes.root_cause.message", nodes);
  for (v1::Rank& r : *view->mutable_ranks()) {
    ranks |= !r.error().empty();
    r.clear_error();
  }
  Hide(view, "ranks.error", ranks);
  Hide(view, "hang_report", view->has_hang_report());
  view->clear_hang_report();
  for (v1::Unkillable& u : *view->mutable_unkillable()) {
    stacks |= !u.stack().empty();
    u.clear_stack();
  }
  Hide(view, "unkillable.stack", stacks);
}

}  // namespace ltd
