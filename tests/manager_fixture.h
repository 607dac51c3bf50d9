// The job table as the unit tests drive it: a JobManager over in-process
// supervisions (LocalSupervisorHost) with a fake clock, launcher and
// ports, on a state dir of the test's own. Each fixture adds its config
// (Make) and its own helpers.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "fakes.h"
#include "job_manager.h"
#include "job_store.h"
#include "local_host.h"

namespace ltd::test {

class ManagerFixture : public ::testing::Test {
 protected:
  // `tag` names the state dir: /tmp/ltd-TAG.XXXXXX.
  explicit ManagerFixture(const std::string& tag) {
    std::string tmpl = "/tmp/ltd-" + tag + ".XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    store_ = std::make_unique<JobStore>(*JobStore::Open(dir_));
  }
  // The manager first, then the store, whose remover thread may still be
  // deleting a pruned job's dir under dir_. A fixture whose members the
  // manager uses (a GpuPool) resets manager_ in its own destructor.
  ~ManagerFixture() override {
    manager_.reset();
    host_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A new manager (and supervisor host) on the same store.
  void Make(const ManagerConfig& config, const RunnerConfig& runner,
            StackSampler* sampler = nullptr) {
    manager_.reset();
    host_ = std::make_unique<LocalSupervisorHost>(clock_, launcher_, *store_, sampler, runner);
    manager_ = std::make_unique<JobManager>(clock_, *host_, *store_, ports_, config);
  }

  std::string Submit(JobSpec spec, std::string user = "alice") {
    auto id = manager_->Submit(std::move(spec), std::move(user));
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : "";
  }
  const Job& Get(const std::string& id) { return **manager_->Resolve(id); }

  std::string dir_;
  FakeClock clock_;
  FakeLauncher launcher_{clock_};
  FakePorts ports_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<LocalSupervisorHost> host_;
  std::unique_ptr<JobManager> manager_;
};

}  // namespace ltd::test
