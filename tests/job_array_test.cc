// `--array SPEC` (common/job_array.h): sbatch's forms, the bounds, and the
// array fields of a job's record read back from hostile JSON.
#include "job_array.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "job.h"
#include "launch_env.h"

namespace ltd::test {
namespace {

std::vector<uint32_t> Tasks(std::string_view spec) {
  auto parsed = ParseArraySpec(spec);
  EXPECT_TRUE(parsed.ok()) << spec << ": " << parsed.status();
  return parsed.ok() ? parsed->tasks : std::vector<uint32_t>{};
}

TEST(ArraySpec, SbatchForms) {
  EXPECT_EQ(Tasks("0-3"), (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(Tasks("7"), (std::vector<uint32_t>{7}));
  EXPECT_EQ(Tasks("1,3,5-7"), (std::vector<uint32_t>{1, 3, 5, 6, 7}));
  EXPECT_EQ(Tasks("0-15:4"), (std::vector<uint32_t>{0, 4, 8, 12}));
  EXPECT_EQ(Tasks("0-10:5,2"), (std::vector<uint32_t>{0, 2, 5, 10}));
  // Given twice, run once; in task order whatever the order typed.
  EXPECT_EQ(Tasks("5,1-2,1"), (std::vector<uint32_t>{1, 2, 5}));
  auto throttled = ParseArraySpec("0-15%4");
  ASSERT_TRUE(throttled.ok());
  EXPECT_EQ(throttled->tasks.size(), 16u);
  EXPECT_EQ(throttled->throttle, 4u);
  EXPECT_EQ(ParseArraySpec("0-5")->throttle, 0u);
  EXPECT_EQ(Tasks("0-999").size(), kMaxArrayTasks);
  EXPECT_EQ(Tasks("100000"), (std::vector<uint32_t>{kMaxArrayIndex}));
}

TEST(ArraySpec, BadSpecsAreRefusedInOneLine) {
  for (std::string_view bad : {"",           "%4",    "5-2", "a",     "1-",     "-3",
                               "1,,2",       "1,",    ",1",  "0-15%", "0-15%0", "0-15%x",
                               "0-15:0",     "0-15:", "3:2", "1-2-3", "0-1000", "0-100001",
                               "100001",     "1 - 3", " 1",  "0x10",  "1%2%3",  "0-2000000000",
                               "99999999999"}) {
    auto parsed = ParseArraySpec(bad);
    EXPECT_FALSE(parsed.ok()) << "'" << bad << "' taken";
    if (parsed.ok()) continue;
    const std::string m(parsed.status().message());
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_LT(m.size(), 400u) << m;
    EXPECT_TRUE(m.starts_with("--array")) << m;
  }
  EXPECT_NE(ParseArraySpec("5-2").status().message().find("reversed"), std::string::npos);
  EXPECT_NE(ParseArraySpec("0-1000").status().message().find("at most 1000"), std::string::npos);
  EXPECT_NE(ParseArraySpec("").status().message().find("no task ids"), std::string::npos);
  // Many bytes of ranges cannot make more than the bound either.
  std::string many;
  for (int i = 0; i < 100; ++i) many += "0-999,";
  many += "1";
  EXPECT_FALSE(ParseArraySpec(many).ok());
  EXPECT_FALSE(ParseArraySpec(std::string(2000, '1')).ok());
  // A control byte comes back escaped, never as itself.
  const std::string m(ParseArraySpec("1\x1b[2J").status().message());
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
}

TEST(ArraySpec, FormatFoldsRanges) {
  EXPECT_EQ(FormatArraySpec(*ParseArraySpec("0-5,7,9-11%2")), "0-5,7,9-11%2");
  EXPECT_EQ(FormatArraySpec(*ParseArraySpec("0-6:2")), "0-6:2");
  EXPECT_EQ(FormatArraySpec(*ParseArraySpec("1,3")), "1,3");
  // Found by fuzz/array_spec: 741 ids a step apart printed one by one
  // were past the bound of a spec, so the print did not read back.
  EXPECT_EQ(FormatArraySpec(*ParseArraySpec("0-2222:3")), "0-2220:3");
}

TEST(ArraySpec, TaskRefs) {
  std::string array;
  uint32_t task = 0;
  EXPECT_TRUE(SplitTaskRef("12_3", &array, &task));
  EXPECT_EQ(array, "12");
  EXPECT_EQ(task, 3u);
  for (std::string_view no :
       {"12", "bert", "_3", "12_", "012_3", "12_x", "a_3", "12_3_4", "12_100001"}) {
    EXPECT_FALSE(SplitTaskRef(no, &array, &task)) << no;
  }
}

TEST(ArrayRecord, RoundTripsAndHostileFieldsAreDropped) {
  Job job;
  job.id = "14";
  job.spec.argv = {"x"};
  job.spec.array = ArrayTask{"12", 2, 6, 2};
  auto back = JobFromJson(ToJson(job));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->spec.array, job.spec.array);
  EXPECT_EQ(DisplayId(*back), "12_2");
  Job plain;
  plain.id = "9";
  EXPECT_EQ(DisplayId(plain), "9");
  EXPECT_FALSE(ToJson(plain).contains("array"));
  for (const char* bad :
       {R"({"job_id": "x1", "task": 1, "count": 2})", R"({"job_id": "012", "task": 1, "count": 2})",
        R"({"job_id": "12", "task": 100001, "count": 2})",
        R"({"job_id": "12", "task": 1, "count": 0})",
        R"({"job_id": "12", "task": 1, "count": 1001})",
        R"({"job_id": "12", "task": -1, "count": 2})", R"({"job_id": 12, "task": 1, "count": 2})",
        R"({"job_id": "12", "task": "1", "count": 2})"}) {
    nlohmann::json j = ToJson(job);
    j["array"] = nlohmann::json::parse(bad);
    auto read = JobFromJson(j);
    ASSERT_TRUE(read.has_value()) << bad;
    EXPECT_TRUE(read->spec.array.job_id.empty()) << bad;
  }
  // A throttle past the count is the count.
  EXPECT_EQ(CheckedArrayTask(ArrayTask{"12", 1, 3, 99}).throttle, 3u);
}

TEST(ArrayEnv, TasksGetLtdNamesNeverSlurms) {
  Job job;
  job.id = "14";
  job.spec.argv = {"x"};
  job.spec.array = ArrayTask{"12", 2, 6, 0};
  const std::vector<std::string> env = RankEnvironment(job, 0, "/d", {});
  auto has = [&](const std::string& kv) {
    return std::find(env.begin(), env.end(), kv) != env.end();
  };
  EXPECT_TRUE(has("LTD_ARRAY_JOB_ID=12"));
  EXPECT_TRUE(has("LTD_ARRAY_TASK_ID=2"));
  EXPECT_TRUE(has("LTD_ARRAY_TASK_COUNT=6"));
  for (const std::string& kv : env) EXPECT_FALSE(kv.starts_with("SLURM_")) << kv;
  Job plain;
  plain.id = "9";
  plain.spec.argv = {"x"};
  for (const std::string& kv : RankEnvironment(plain, 0, "/d", {})) {
    EXPECT_FALSE(kv.starts_with("LTD_ARRAY_")) << kv;
  }
}

}  // namespace
}  // namespace ltd::test
