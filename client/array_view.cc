#include "array_view.h"

#include <algorithm>
#include <map>

#include "bytes.h"
#include "render.h"
#include "str_util.h"
#include "table.h"

namespace ltd {
namespace {

std::string Text(const std::string& s) {
  return s.empty() ? "-" : DisplayEscape(s, Controls::kEscape);
}

}  // namespace

std::string ShownId(const v1::Job& job) {
  if (job.array_job_id().empty()) return job.id();
  return Cat(job.array_job_id(), "_", job.array_task_id());
}

void PrintArrayField(const v1::Job& j, FILE* out) {
  if (j.array_job_id().empty()) return;
  std::fprintf(out, "%-14s %s\n", "Array:",
               Cat(Text(j.array_job_id()), ", task ", j.array_task_id(), " (", Text(ShownId(j)),
                   ") of ", j.array_task_count(),
                   j.array_throttle() != 0 ? Cat(", at most ", j.array_throttle(), " at once") : "",
                   "; `ltctl show ", Text(j.array_job_id()), "` lists them")
                   .c_str());
}

void PrintArray(const v1::Job& a, FILE* out) {
  auto field = [&](const char* label, const std::string& value) {
    std::fprintf(out, "%-14s %s\n", label, value.c_str());
  };
  field("Array:",
        Cat(Text(a.array_job_id()), a.name().empty() ? "" : Cat(" (", Text(a.name()), ")"), ", ",
            a.array_task_count(), " tasks",
            a.array_throttle() != 0 ? Cat(", at most ", a.array_throttle(), " at once") : ""));
  field("User:", Text(a.user()));
  field("Command:", CommandText(a));
  // By state, in the order of the first task in each.
  std::vector<std::pair<std::string, int>> by_state;
  for (const v1::ArrayTaskState& t : a.array_tasks()) {
    const std::string state = v1::Job::State_Name(t.state());
    auto it = std::find_if(by_state.begin(), by_state.end(),
                           [&](const auto& p) { return p.first == state; });
    if (it == by_state.end()) {
      by_state.emplace_back(state, 1);
    } else {
      ++it->second;
    }
  }
  std::string counts;
  for (const auto& [state, n] : by_state) counts += Cat(counts.empty() ? "" : ", ", n, " ", state);
  if (static_cast<uint32_t>(a.array_tasks_size()) < a.array_task_count()) {
    counts += Cat(" (", a.array_task_count() - static_cast<uint32_t>(a.array_tasks_size()),
                  " no longer kept)");
  }
  field("Tasks:", counts);
  std::fprintf(out, "\n");
  Table t({"TASK", "JOB", "STATE", "EXIT"});
  for (const v1::ArrayTaskState& task : a.array_tasks()) {
    std::string state = v1::Job::State_Name(task.state());
    if (!task.pending_reason().empty()) state += " (" + Text(task.pending_reason()) + ")";
    t.Add({Cat(Text(a.array_job_id()), "_", task.task_id()), Text(task.job_id()), state,
           task.has_exit_code() ? std::to_string(task.exit_code()) : "-"});
  }
  t.Print(out);
}

}  // namespace ltd
