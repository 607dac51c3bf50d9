// The gRPC edge: validates and copies each request (api_convert.h), posts
// the work onto the loop, and finishes the reply from there. The only file
// that knows both gRPC and the job manager.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "api_convert.h"
#include "event_stream.h"
#include "job_manager.h"
#include "listener.h"
#include "loop.h"
#include "ltd.grpc.pb.h"
#include "stream_quota.h"
#include "user_files.h"
#include "user_waits.h"

namespace ltd {

// `s` as the status of a call's answer: its message one line of ltd's own
// (rpc/ltd_status.h), the code the same.
grpc::Status ToGrpc(const absl::Status& s);

class LtdService final : public v1::Ltd::CallbackService {
 public:
  // A user (root excepted) holds at most `user_max_streams` streams at
  // once (0: no bound); see StreamQuota. `user_files`: where a submit's
  // --output and --error are checked, as its user.
  LtdService(Loop& loop, JobManager& manager, const Listener& listener, UserFiles& user_files,
             size_t user_max_streams = 0)
      : loop_(loop),
        manager_(manager),
        listener_(listener),
        user_files_(user_files),
        quota_(user_max_streams) {}

  grpc::ServerWriteReactor<v1::JobEvent>* Submit(grpc::CallbackServerContext* ctx,
                                                 const v1::SubmitRequest* req) override;
  grpc::ServerWriteReactor<v1::ListReply>* List(grpc::CallbackServerContext* ctx,
                                                const v1::ListRequest* req) override;
  grpc::ServerUnaryReactor* Show(grpc::CallbackServerContext* ctx, const v1::JobRef* req,
                                 v1::Job* reply) override;
  grpc::ServerWriteReactor<v1::JobEvent>* Logs(grpc::CallbackServerContext* ctx,
                                               const v1::LogsRequest* req) override;
  grpc::ServerWriteReactor<v1::JobEvent>* Attach(grpc::CallbackServerContext* ctx,
                                                 const v1::JobRef* req) override;
  grpc::ServerWriteReactor<v1::JobEvent>* Wait(grpc::CallbackServerContext* ctx,
                                               const v1::JobRef* req) override;
  grpc::ServerUnaryReactor* Kill(grpc::CallbackServerContext* ctx, const v1::KillRequest* req,
                                 v1::KillReply* reply) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx,
                                     const v1::ShutdownRequest* req,
                                     v1::ShutdownReply* reply) override;
  grpc::ServerUnaryReactor* Gpus(grpc::CallbackServerContext* ctx, const v1::GpusRequest* req,
                                 v1::GpusReply* reply) override;
  grpc::ServerUnaryReactor* Stack(grpc::CallbackServerContext* ctx, const v1::StackRequest* req,
                                  v1::StackReply* reply) override;
  grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext* ctx, const v1::DrainRequest* req,
                                  v1::DrainReply* reply) override;
  grpc::ServerUnaryReactor* Resume(grpc::CallbackServerContext* ctx, const v1::ResumeRequest* req,
                                   v1::DrainReply* reply) override;

  // Members of this group (by name; "": none) may do what root may to ltd
  // itself (drain, resume). An unknown group is an error.
  absl::Status SetAdminGroup(const std::string& group);
  // Whether another user's job's details are hidden from a caller who is
  // neither root nor of the admin group (--private-data; HideOthersDetails).
  void set_private_jobs(bool on) { private_jobs_ = on; }

  // What `ltctl shutdown` does (loop thread): end every job, then call
  // `finished` and stop.
  using ShutdownFn = std::function<void(std::function<void()> finished)>;
  void set_shutdown(ShutdownFn fn) { shutdown_ = std::move(fn); }

  // Refuse new work from now on (ltd is stopping).
  void Close() { closed_ = true; }

 private:
  // Submits the checked `spec` (on the loop) and answers `out`: accepted,
  // then, attached, the job's lines. Any thread.
  void Accept(JobSpec spec, std::string user, std::shared_ptr<EventStream::Handle> out, bool detach,
              bool cancel, bool batched);
  // Unobserves once the client is gone. Loop thread.
  void UnobserveWhenGone(EventStream::Handle& out, const std::string& id,
                         JobManager::ObserverId oid);
  // The client of a cancel_on_disconnect stream went away: tears its job
  // down if it has not ended and ltd is not stopping. Loop thread.
  void CancelLaunched(const std::string& id);
  // Who calls; refused when the listener cannot tell.
  absl::StatusOr<PeerCreds> Caller(grpc::CallbackServerContext* ctx) const;
  // The opening checks of a call about one job, on gRPC's thread: who
  // calls, and whether `ref` could name a job at all.
  absl::StatusOr<PeerCreds> JobCaller(grpc::CallbackServerContext* ctx,
                                      const std::string& ref) const;
  // The caller of a stream, holding one of its user's streams until the
  // stream ends, with `ref` checked as JobCaller does when given; nullopt
  // (and `stream` finished with why) if refused.
  template <class Stream>
  std::optional<PeerCreds> StreamCaller(grpc::CallbackServerContext* ctx, Stream* stream,
                                        const std::string* ref = nullptr);
  // On the loop: the job `ref` names for `who`; with `control`, refused
  // unless `who` owns it or is root.
  absl::StatusOr<const Job*> JobFor(const std::string& ref, const PeerCreds& who,
                                    bool control) const;

  // A kill of every live task of an array (service_array.cc), for its
  // owner or root: an error (and `reactor` left to the caller), or OK and
  // `reactor` finished once each task answered. Loop thread.
  absl::Status KillArray(const std::vector<const Job*>& tasks, KillOrder order,
                         const PeerCreds& who, v1::KillReply* reply,
                         grpc::ServerUnaryReactor* reactor);
  // Show of a whole array: its first task, and each task in short.
  void ShowArray(const std::vector<const Job*>& tasks, uid_t caller, bool all, v1::Job* reply);

  // Root, or a member of the admin group. May ask NSS: not on the loop.
  bool IsAdmin(const PeerCreds& who) const;
  // Whether `who` sees every job's details (no --private-data, or an
  // admin). May ask NSS: not on the loop.
  bool SeesAllDetails(const PeerCreds& who) const;
  // A view of `job` for `who`: another's job loses what HideOthersDetails
  // hides unless `all` (SeesAllDetails).
  static void ForCaller(const Job& job, uid_t who, bool all, v1::Job* view);
  // `job` as ps and show send it (ToProto), with why it waits. On the loop.
  void View(const Job& job, const ViewLimits& limits, v1::Job* view) const;
  // Drain (with a deadline for running jobs) or resume (`reason` nullopt),
  // for an admin.
  grpc::ServerUnaryReactor* SetDrain(grpc::CallbackServerContext* ctx,
                                     std::optional<std::string> reason, v1::DrainReply* reply,
                                     Millis deadline = Millis{0});

  Loop& loop_;
  JobManager& manager_;
  std::optional<gid_t> admin_gid_;
  bool private_jobs_ = true;
  std::string admin_group_;
  const Listener& listener_;
  UserFiles& user_files_;
  StreamQuota quota_;
  // Whole records of finished jobs being read for Show (loop thread).
  static constexpr int kMaxShowReads = 4;
  int show_reads_ = 0;
  std::atomic<bool> closed_{false};
  ShutdownFn shutdown_;
  // Last: destroyed first, waiting for checks that still use the members
  // above (each ends by the helper's deadline).
  UserWaits file_waits_{"submits waiting for their files"};
};

}  // namespace ltd
