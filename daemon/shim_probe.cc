#include "shim_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "framed_shim_channel.h"
#include "pidfd.h"
#include "shim_frames.h"
#include "shim_watcher.h"
#include "spdlog/spdlog.h"

namespace ltd {

namespace {

namespace pb = shim::v1;

// Whether `reply` is the supervisor of `job_id` on this state dir, speaking
// `api_version`; logs why not.
bool IsOurs(const std::string& job_id, const pb::HelloReply& r, uint32_t api_version,
            const std::string& canonical_state_dir) {
  if (r.api_version() == api_version && r.job_id() == job_id &&
      r.state_dir() == canonical_state_dir && r.pid() > 0) {
    return true;
  }
  spdlog::error(
      "job={} the supervisor on its socket is not its own (api {}, job {}, state dir {}); not "
      "adopted",
      job_id, r.api_version(), r.job_id(), r.state_dir());
  return false;
}

bool Found(const std::string& job_id, const pb::HelloReply& r, FoundShim* f) {
  Fd pidfd(PidfdOpen(r.pid()));
  if (!pidfd.valid()) {
    spdlog::warn("job={} supervisor pid {} is gone: {}", job_id, r.pid(), std::strerror(errno));
    return false;
  }
  f->pid = r.pid();
  f->pidfd = std::move(pidfd);
  f->release = r.release();
  return true;
}

// What an idle supervisor answers well within; past it ltd's log says
// which it still waits for.
constexpr std::chrono::milliseconds kAnswersAtOnce{1000};

// Hello over frames to every supervisor of `jobs` (id, socket) at once,
// each within `timeout`: a connection that does not connect at once, or
// does not answer in time, is no supervisor of ours.
void ProbeFramed(const std::vector<std::pair<std::string, std::string>>& jobs,
                 const std::string& canonical_state_dir, std::chrono::milliseconds timeout,
                 std::map<std::string, FoundShim>* found) {
  struct Probe {
    std::string job_id;
    Fd fd;
    FrameReader reader{kMaxAnswerFrame};
  };
  std::vector<Probe> probes;
  std::string hello;
  pb::Call call;
  call.set_id(1);
  call.mutable_hello();
  AppendFrame(call, &hello);
  for (const auto& [id, path] : jobs) {
    absl::StatusOr<Fd> fd = FramedShimChannel::ConnectNow(path);
    if (!fd.ok()) {
      spdlog::warn("job={} no supervisor answered: {}", id, std::string(fd.status().message()));
      continue;
    }
    if (send(fd->get(), hello.data(), hello.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(hello.size())) {
      spdlog::warn("job={} no supervisor answered: {}", id, std::strerror(errno));
      continue;
    }
    probes.push_back(Probe{id, std::move(*fd)});
  }
  const auto start = std::chrono::steady_clock::now();
  const auto give_up = start + timeout;
  bool said_waiting = false;
  size_t open = probes.size();
  while (open > 0) {
    if (!said_waiting && std::chrono::steady_clock::now() - start >= kAnswersAtOnce) {
      said_waiting = true;
      for (const Probe& p : probes) {
        if (p.fd.valid()) {
          spdlog::info(
              "job={} its supervisor took its call and has not answered yet; waiting up "
              "to {} ms in all",
              p.job_id, timeout.count());
        }
      }
    }
    std::vector<pollfd> fds;
    std::vector<Probe*> of;
    for (Probe& p : probes) {
      if (!p.fd.valid()) continue;
      fds.push_back(pollfd{p.fd.get(), POLLIN, 0});
      of.push_back(&p);
    }
    const auto now = std::chrono::steady_clock::now();
    // Rounded up: a poll woken a fraction of a millisecond early waits again.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(give_up - now);
    if (left.count() <= 0) break;
    // Woken at kAnswersAtOnce too, to say who is waited for.
    const auto say_at = std::chrono::ceil<std::chrono::milliseconds>(start + kAnswersAtOnce - now);
    const auto wait = said_waiting || say_at.count() <= 0 ? left : std::min(left, say_at);
    const int n = poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Probe& p = *of[i];
      char buf[64 << 10];
      const ssize_t got = read(p.fd.get(), buf, sizeof(buf));
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      auto fail = [&](const char* why) {
        spdlog::warn("job={} no supervisor answered: {}", p.job_id, why);
        p.fd.reset();
        --open;
      };
      if (got <= 0) {
        fail("its connection closed");
        continue;
      }
      p.reader.Feed(std::string_view(buf, static_cast<size_t>(got)));
      std::string_view frame;
      const FrameReader::Got g = p.reader.Next(&frame);
      if (g == FrameReader::Got::kMore) continue;
      pb::Answer answer;
      if (g != FrameReader::Got::kFrame ||
          !answer.ParseFromArray(frame.data(), static_cast<int>(frame.size())) ||
          answer.id() != 1 || !answer.has_hello()) {
        fail("it answered something that is no hello");
        continue;
      }
      FoundShim f;
      if (IsOurs(p.job_id, answer.hello(), 2, canonical_state_dir) &&
          Found(p.job_id, answer.hello(), &f)) {
        f.framed = std::move(p.fd);
        found->emplace(p.job_id, std::move(f));
      }
      p.fd.reset();
      --open;
    }
  }
  for (Probe& p : probes) {
    if (p.fd.valid())
      spdlog::warn("job={} no supervisor answered within {} ms", p.job_id, timeout.count());
  }
}

// The same over gRPC, to supervisors of an earlier release.
void ProbeGrpc(const std::vector<std::pair<std::string, std::string>>& jobs,
               const std::string& canonical_state_dir, std::chrono::milliseconds timeout,
               std::map<std::string, FoundShim>* found) {
  struct Call {
    std::string job_id;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::Supervisor::Stub> stub;
    grpc::ClientContext ctx;
    pb::HelloRequest request;
    pb::HelloReply reply;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::mutex mu;
  std::condition_variable cv;
  size_t pending = 0;
  for (const auto& [id, path] : jobs) {
    auto call = std::make_unique<Call>();
    call->job_id = id;
    call->channel = ShimSocketChannel(path);
    call->stub = pb::Supervisor::NewStub(call->channel);
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
  for (auto& c : calls) {
    if (!c->status.ok()) {
      spdlog::warn("job={} no supervisor answered (an earlier release's, over gRPC)", c->job_id);
      continue;
    }
    FoundShim f;
    if (!IsOurs(c->job_id, c->reply, 1, canonical_state_dir) || !Found(c->job_id, c->reply, &f)) {
      continue;
    }
    f.grpc_channel = c->channel;
    found->emplace(c->job_id, std::move(f));
  }
}

}  // namespace

std::map<std::string, FoundShim> ProbeShims(const JobStore& store,
                                            const std::string& canonical_state_dir,
                                            const std::vector<std::string>& job_ids,
                                            std::chrono::milliseconds timeout) {
  // Both kinds at once, each bounded: one wedged supervisor costs
  // `timeout`, not `timeout` per job.
  std::vector<std::pair<std::string, std::string>> framed, grpc;
  for (const std::string& id : job_ids) {
    const std::string dir = store.JobDir(id);
    struct stat st;
    if (lstat((dir + "/supervisor.sock").c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      framed.emplace_back(id, dir + "/supervisor.sock");
    } else {
      grpc.emplace_back(id, dir + "/shim.sock");
    }
  }
  std::map<std::string, FoundShim> found;
  std::thread old;
  std::map<std::string, FoundShim> found_old;
  if (!grpc.empty()) {
    old = std::thread([&] { ProbeGrpc(grpc, canonical_state_dir, timeout, &found_old); });
  }
  if (!framed.empty()) ProbeFramed(framed, canonical_state_dir, timeout, &found);
  if (old.joinable()) old.join();
  found.merge(found_old);
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
