// The job table's order (daemon/jobs/job_manager.cc): ids as they were
// handed out, which a listing walks as it is, page by page.
#include <gtest/gtest.h>

#include "manager_fixture.h"

namespace ltd::test {
namespace {

class JobManagerListTest : public ManagerFixture {
 protected:
  JobManagerListTest() : ManagerFixture("jml") {
    ManagerConfig config;
    config.placement.slots = 8;
    Make(config, RunnerConfig{});
  }

  static JobSpec Spec() {
    JobSpec s;
    s.devices = 1;
    s.argv = {"/bin/true"};
    s.cwd = "/";
    s.uid = getuid();
    s.gid = getgid();
    return s;
  }
};

// The table walks ids as they were handed out (9 before 10, which a
// string's order would not), and a page of a listing starts after the
// last id of the one before without walking the ones before it.
TEST_F(JobManagerListTest, ListingWalksIdsInTheOrderTheyWereHandedOut) {
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(Submit(Spec()));
  std::vector<std::string> listed;
  for (const Job* job : manager_->List(true)) listed.push_back(job->id);
  EXPECT_EQ(listed, ids);
  std::vector<std::string> after9;
  manager_->ForEachAfter("9", [&](const Job& job) {
    after9.push_back(job.id);
    return true;
  });
  EXPECT_EQ(after9, (std::vector<std::string>{"10", "11", "12"}));
  std::vector<std::string> first2;
  manager_->ForEachAfter("", [&](const Job& job) {
    first2.push_back(job.id);
    return first2.size() < 2;
  });
  EXPECT_EQ(first2, (std::vector<std::string>{"1", "2"}));
}

}  // namespace
}  // namespace ltd::test
