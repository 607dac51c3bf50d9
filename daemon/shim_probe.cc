#include "shim_probe.h"

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>

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

}  // namespace ltd
