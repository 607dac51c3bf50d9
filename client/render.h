// How ltctl shows jobs to people: `ps` tables and `show` pages, drawn from
// the job records ltd sends (the same JSON as `--json`).
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ltd {

void PrintJobTable(const std::vector<nlohmann::json>& jobs, FILE* out);
void PrintJob(const nlohmann::json& job, FILE* out);
// "rank 2 exited with code 3" and the like, for one-line outcomes.
std::string DescribeCause(const nlohmann::json& cause);

}  // namespace ltd
