#include "local_host.h"

#include "shim_record.h"

namespace ltd {
namespace {

// The runner's records, through the wire: what ltd would read of an
// lt-shim's Watch stream (the first record whole, later ones without the
// command line, the final one whole).
class OverTheWire final : public SupervisionEvents {
 public:
  explicit OverTheWire(SupervisionEvents& table) : table_(table) {}

  void OnChanged(const Job& job, Change change) override {
    if (auto got = Carry(job, false)) table_.OnChanged(got->job, change);
    slim_ = true;
  }
  void OnBeats(const std::vector<RankBeat>& beats) override { table_.OnBeats(beats); }
  void OnOutput(int rank, Stream stream, std::string_view line) override {
    table_.OnOutput(rank, stream, line);
  }
  void OnOutputResumed(bool missed) override { table_.OnOutputResumed(missed); }
  void OnEnded(const Job& job) override {
    if (auto got = Carry(job, true); got && got->final_record) table_.OnEnded(got->job);
  }
  void OnLost(std::string why) override { table_.OnLost(std::move(why)); }

 private:
  std::optional<ReceivedRecord> Carry(const Job& job, bool final_record) const {
    std::string bytes;
    RecordEventOf(job, final_record, RecordForm{true, slim_ && !final_record})
        .SerializeToString(&bytes);
    shim::v1::Event event;
    if (!event.ParseFromString(bytes)) return std::nullopt;
    return RecordOf(event);
  }

  SupervisionEvents& table_;
  bool slim_ = false;
};

class LocalSupervision final : public Supervision {
 public:
  explicit LocalSupervision(std::unique_ptr<OverTheWire> wire) : wire_(std::move(wire)) {}
  void Kill(KillOrder order, Done done) override { done(runner_->Kill(std::move(order))); }
  void Stacks(std::optional<int> rank, Millis budget, StacksDone done) override {
    runner_->Stacks(rank, budget, std::move(done));
  }

  std::unique_ptr<OverTheWire> wire_;  // before the runner, which reports to it
  std::unique_ptr<JobRunner> runner_;
};

}  // namespace

std::unique_ptr<Supervision> LocalSupervisorHost::Start(const Job& job, SupervisionEvents& events) {
  auto supervision = std::make_unique<LocalSupervision>(std::make_unique<OverTheWire>(events));
  supervision->runner_ = std::make_unique<JobRunner>(clock_, launcher_, store_, sampler_, config_,
                                                     job, *supervision->wire_);
  JobRunner& r = *supervision->runner_;
  r.Start();
  return supervision;
}

}  // namespace ltd
