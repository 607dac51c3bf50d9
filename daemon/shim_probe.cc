#include "shim_probe.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "pidfd.h"
#include "shim_watcher.h"
#include "spdlog/spdlog.h"

namespace ltd {

std::map<std::string, FoundShim> ProbeShims(const JobStore& store,
                                            const std::string& canonical_state_dir,
                                            const std::vector<std::string>& job_ids,
                                            std::chrono::milliseconds timeout) {
  struct Call {
    std::string job_id;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<shim::v1::Supervisor::Stub> stub;
    grpc::ClientContext ctx;
    shim::v1::HelloRequest request;
    shim::v1::HelloReply reply;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::mutex mu;
  std::condition_variable cv;
  size_t pending = 0;
  // All at once, each bounded: one wedged supervisor costs `timeout`, not
  // `timeout` per job.
  for (const std::string& id : job_ids) {
    auto call = std::make_unique<Call>();
    call->job_id = id;
    call->channel = ShimSocketChannel(store.JobDir(id) + "/shim.sock");
    call->stub = shim::v1::Supervisor::NewStub(call->channel);
    call->ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    Call* c = call.get();
    calls.push_back(std::move(call));
    {
      std::lock_guard lock(mu);
      ++pending;
    }
    c->stub->async()->Hello(&c->ctx, &c->request, &c->reply, [&, c](grpc::Status s) {
      std::lock_guard lock(mu);
      c->status = std::move(s);
      if (--pending == 0) cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return pending == 0; });
  }
  std::map<std::string, FoundShim> found;
  for (auto& c : calls) {
    if (!c->status.ok()) {
      spdlog::warn("job={} no supervisor answered: {}", c->job_id, c->status.error_message());
      continue;
    }
    const shim::v1::HelloReply& r = c->reply;
    if (r.api_version() != 1 || r.job_id() != c->job_id || r.state_dir() != canonical_state_dir ||
        r.pid() <= 0) {
      spdlog::error(
          "job={} the supervisor on its socket is not its own (api {}, job {}, state dir {}); "
          "not adopted",
          c->job_id, r.api_version(), r.job_id(), r.state_dir());
      continue;
    }
    Fd pidfd(PidfdOpen(r.pid()));
    if (!pidfd.valid()) {
      spdlog::warn("job={} supervisor pid {} is gone: {}", c->job_id, r.pid(),
                   std::strerror(errno));
      continue;
    }
    FoundShim f;
    f.pid = r.pid();
    f.pidfd = std::move(pidfd);
    f.release = r.release();
    f.channel = c->channel;
    found.emplace(c->job_id, std::move(f));
  }
  return found;
}

std::vector<std::string> AwaitStartingShims(const JobStore& store,
                                            const std::vector<std::string>& pending,
                                            std::chrono::milliseconds deadline) {
  const auto give_up = std::chrono::steady_clock::now() + deadline;
  std::vector<std::string> started;
  for (const std::string& id : pending) {
    const std::string path = store.SupervisorLock(id);
    // No lock file: no supervisor was ever started for the job.
    Fd lock(open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
    if (!lock.valid()) continue;
    for (;;) {
      if (flock(lock.get(), LOCK_EX | LOCK_NB) == 0) break;  // none there now
      if (errno != EWOULDBLOCK && errno != EINTR) {
        spdlog::warn("job={} flock({}): {}", id, path, std::strerror(errno));
        break;
      }
      auto job = store.Load(id);
      if (job.ok() && job->state != JobState::kPending) {
        if (job->state == JobState::kRunning) started.push_back(id);
        break;
      }
      if (std::chrono::steady_clock::now() >= give_up) {
        spdlog::warn(
            "job={} a supervisor an earlier ltd started neither went nor started the job "
            "within {} ms; the job is queued again",
            id, deadline.count());
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return started;
}

}  // namespace ltd
