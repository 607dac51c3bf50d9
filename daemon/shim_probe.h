// ltd's start-up probe of the supervisors an earlier ltd left: each job
// RUNNING in the state dir is asked, on its socket, who answers there:
// frames on supervisor.sock (this release's), gRPC on shim.sock (an
// earlier release's).
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
  // The connection it answered on: frames (api_version 2), or else gRPC.
  Fd framed;
  std::shared_ptr<grpc::Channel> grpc_channel;
};

// Asks the supervisors of `job_ids` who they are, all at once, each within
// `timeout`; those that answer for their job and `canonical_state_dir`,
// by job id. Blocks (ltd's start-up, before its loop runs).
std::map<std::string, FoundShim> ProbeShims(const JobStore& store,
                                            const std::string& canonical_state_dir,
                                            const std::vector<std::string>& job_ids,
                                            std::chrono::milliseconds timeout);

// Of the PENDING jobs `pending`, waits (up to `deadline` in all) for each
// supervisor that an earlier ltd started and had not yet seen RUNNING: it
// holds the job's lock, and either goes (that ltd died before it watched
// it) or has been watched and is starting the job. Returns the jobs whose
// record is RUNNING now, whose supervisors are to be probed and kept.
// Blocks (ltd's start-up, before its loop runs).
std::vector<std::string> AwaitStartingShims(const JobStore& store,
                                            const std::vector<std::string>& pending,
                                            std::chrono::milliseconds deadline);

}  // namespace ltd
