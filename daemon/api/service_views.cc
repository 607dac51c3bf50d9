// The service's views of the job table: `ps` (List), a page at a time,
// and `show`, which reads a record on libuv's pool where memory keeps a
// job's summary or a waiting job's head of its command line.
#include <algorithm>
#include <memory>

#include "api_convert.h"
#include "job_store.h"
#include "list_filter.h"
#include "page_stream.h"
#include "service.h"

namespace ltd {

grpc::ServerWriteReactor<v1::ListReply>* LtdService::List(grpc::CallbackServerContext* ctx,
                                                          const v1::ListRequest* req) {
  auto* stream = new PageStream();
  // Its pages are every job's summary: bounded per user like any stream.
  auto who = StreamCaller(ctx, stream);
  if (!who) return stream;
  auto filter = FilterFromRequest(*req, who->uid);
  if (!filter.ok()) {
    stream->handle()->Finish(ToGrpc(filter.status()));
    return stream;
  }
  // --no-trunc: each command up to what a finished job's summary keeps and more.
  const ViewLimits limits =
      req->no_trunc() ? ViewLimits{16 * 1024, kListLimits.text, kListLimits.nodes} : kListLimits;
  // One page at a time, each built on the loop once the client has taken
  // the one before (page_stream.h): the jobs after `after`, the last sent.
  struct Listing {
    ListFilter filter;
    ViewLimits limits;
    uid_t uid;
    bool all;
    std::string after;
  };
  auto listing = std::make_shared<Listing>(
      Listing{std::move(*filter), limits, who->uid, SeesAllDetails(*who), ""});
  auto page = [this, listing, out = stream->handle()] {
    // Pages of a bounded size whatever the number and size of the records
    // (gRPC refuses a message over 4 MB); each job's text is cut short.
    constexpr int kPageJobs = 500;
    constexpr size_t kPageBytes = 1 << 20;
    v1::ListReply reply;
    size_t bytes = 0;
    bool more = false;  // a job is left for the next page
    manager_.ForEachAfter(listing->after, [&](const Job& job) {
      if (!listing->filter.Matches(job)) return true;
      v1::Job view;
      View(job, listing->limits, &view);
      ForCaller(job, listing->uid, listing->all, &view);
      const size_t size = view.ByteSizeLong();
      if (reply.jobs_size() >= kPageJobs || (bytes + size > kPageBytes && reply.jobs_size() > 0)) {
        more = true;
        return false;
      }
      bytes += size;
      *reply.add_jobs() = std::move(view);
      listing->after = job.id;
      return true;
    });
    if (more) return out->Send(std::move(reply), std::nullopt);
    if (reply.jobs_size() == 0) return out->Finish(grpc::Status::OK);
    out->Send(std::move(reply), grpc::Status::OK);
  };
  stream->SetPager([this, page] { loop_.Post(page); });
  loop_.Post(page);
  return stream;
}

grpc::ServerUnaryReactor* LtdService::Show(grpc::CallbackServerContext* ctx, const v1::JobRef* req,
                                           v1::Job* reply) {
  auto* reactor = ctx->DefaultReactor();
  if (auto s = CheckJobRef(req->job()); !s.ok()) {
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  // Anyone may read a job, as `ps` shows anyone's processes.
  auto who = Caller(ctx);
  const PeerCreds caller =
      who.ok() ? *who
               : PeerCreds{.uid = JobManager::kAnyone, .gid = 0, .pid = 0, .groups = std::nullopt};
  // Its details are its owner's (--private-data): one who cannot be told
  // sees none.
  const bool all = who.ok() && SeesAllDetails(caller);
  loop_.Post([this, ref = req->job(), caller, all, reply, reactor] {
    if (auto whole = manager_.ResolveAny(ref, caller.uid); whole.ok() && whole->tasks.size() > 1) {
      ShowArray(whole->tasks, caller.uid, all, reply);
      return reactor->Finish(grpc::Status::OK);
    }
    auto job = JobFor(ref, caller, /*control=*/false);
    if (!job.ok()) return reactor->Finish(ToGrpc(job.status()));
    // A finished job's summary, or a waiting job's head of its command
    // line: its whole record is on disk, read on libuv's pool (a record
    // may be megabytes); what memory has should that fail, or while
    // kMaxShowReads are being read (what they hold is memory too).
    const TableFields& cut = (*job)->table;
    if ((cut.argv_cut == 0 && !cut.details_cut) || show_reads_ >= kMaxShowReads) {
      View(**job, kShowLimits, reply);
      ForCaller(**job, caller.uid, all, reply);
      return reactor->Finish(grpc::Status::OK);
    }
    struct Read {
      uv_work_t req{};
      const LtdService* service;
      const JobStore* store;
      std::string id;
      Job summary;
      absl::StatusOr<Job> loaded = absl::UnknownError("not read");
      v1::Job* reply;
      grpc::ServerUnaryReactor* reactor;
      int* reads;
      uid_t caller;
      bool all;
    };
    auto* read =
        new Read{{},    this,    &manager_.store(), (*job)->id, **job, absl::UnknownError(""),
                 reply, reactor, &show_reads_,      caller.uid, all};
    ++show_reads_;
    read->req.data = read;
    uv_queue_work(
        loop_.get(), &read->req,
        [](uv_work_t* w) {
          auto* r = static_cast<Read*>(w->data);
          r->loaded = r->store->Load(r->id);
        },
        [](uv_work_t* w, int) {
          std::unique_ptr<Read> r(static_cast<Read*>(w->data));
          --*r->reads;
          if (!r->loaded.ok()) {
            r->service->View(r->summary, kShowLimits, r->reply);
          } else if (IsFinal(r->summary.state)) {
            ToProto(*r->loaded, kShowLimits, r->reply);
          } else {
            // Live: the table's, with the record's command line.
            r->summary.spec.argv = std::move(r->loaded->spec.argv);
            r->summary.table.argv_cut = 0;
            r->service->View(r->summary, kShowLimits, r->reply);
          }
          // The summary's owner: a record read from disk is not trusted to say whose.
          ForCaller(r->summary, r->caller, r->all, r->reply);
          r->reactor->Finish(grpc::Status::OK);
        });
  });
  return reactor;
}

}  // namespace ltd
