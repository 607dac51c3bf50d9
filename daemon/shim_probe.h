// ltd's start-up probe of the supervisors an earlier ltd left: each job
// RUNNING in the state dir is asked, on its socket, who answers there.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fd.h"
#include "job_store.h"

namespace ltd {

// A supervisor found alive and answering for its job on this state dir.
struct FoundShim {
  pid_t pid = 0;
  Fd pidfd;
  std::string release;
  std::shared_ptr<grpc::Channel> channel;
};

// Asks the supervisors of `job_ids` who they are, all at once, each within
// `timeout`; those that answer for their job and `canonical_state_dir`,
// by job id. Blocks (ltd's start-up, before its loop runs).
std::map<std::string, FoundShim> ProbeShims(const JobStore& store,
                                            const std::string& canonical_state_dir,
                                            const std::vector<std::string>& job_ids,
                                            std::chrono::milliseconds timeout);

}  // namespace ltd
