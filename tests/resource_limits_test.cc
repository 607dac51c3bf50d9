// What ranks' resource limits are made of: the submitter's, each no higher
// than ltd's own; a client's names and values are hostile.
#include "resource_limits.h"

#include <gtest/gtest.h>

namespace ltd::test {
namespace {

TEST(ResourceLimits, EachIsTheLowerOfTheSubmittersAndLtds) {
  const std::vector<ResourceLimit> own = {{RLIMIT_NOFILE, 20000, 20000},
                                          {RLIMIT_NPROC, 4000, 8000}};
  auto got = RankLimits({{"NOFILE", 512, 512}, {"NPROC", 10000, RLIM_INFINITY}}, own);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got,
            (std::vector<ResourceLimit>{{RLIMIT_NOFILE, 512, 512}, {RLIMIT_NPROC, 4000, 8000}}));
  // Nothing sent (an earlier ltctl): ltd's own as it started.
  EXPECT_EQ(*RankLimits({}, own), own);
}

TEST(ResourceLimits, UnknownNamesAndSoftAboveHardAreRefused) {
  auto unknown = RankLimits({{"RTPRIO", 1, 1}}, OwnLimits());
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(std::string(unknown.status().message()).find("RTPRIO"), std::string::npos);
  EXPECT_FALSE(RankLimits({{"NOFILE", 10, 5}}, OwnLimits()).ok());
}

TEST(ResourceLimits, StartLimitsAreTakenOnce) {
  const std::vector<ResourceLimit>& first = StartLimits();
  EXPECT_EQ(&first, &StartLimits());
  EXPECT_EQ(first.size(), PropagatedResources().size());
}

}  // namespace
}  // namespace ltd::test
