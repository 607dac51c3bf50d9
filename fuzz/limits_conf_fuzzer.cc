// limits.conf and limits.d files as ltd reads them for a user
// (model/limits_conf.h): root parses them, so any bytes must be taken.
// Invariants: every resource of the base is in the result, once; a soft
// limit is never above its hard one; a line that names no one of the user
// changes nothing (root, who gets no `*` or group lines, sees the same
// result as from an empty file when the file names no root line); the
// user looked up lazily, at most once, gives the same result.
#include "fuzz_check.h"
#include "limits_conf.h"

using namespace ltd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::vector<ResourceLimit> base = {{RLIMIT_NOFILE, 1024, 4096},
                                           {RLIMIT_NPROC, 100, 200},
                                           {RLIMIT_CPU, RLIM_INFINITY, RLIM_INFINITY}};
  LimitsUser user;
  user.name = "alice";
  user.uid = 1500;
  user.gid = 1500;
  user.gids = {1500, 27};
  user.groups = {"alice", "sudo"};
  LimitsConf conf(user, base);
  conf.Apply(bytes);
  conf.Apply(bytes);  // a second file, the same bytes
  const std::vector<ResourceLimit> got = conf.Result();
  // Looked up only when a line names a domain, once: the same result.
  int lookups = 0;
  LimitsConf lazy(
      [&] {
        ++lookups;
        return user;
      },
      base);
  lazy.Apply(bytes);
  lazy.Apply(bytes);
  FUZZ_CHECK(lookups <= 1);
  FUZZ_CHECK(lazy.Result() == got);
  FUZZ_CHECK(got.size() == base.size());
  for (size_t i = 0; i < got.size(); ++i) {
    FUZZ_CHECK(got[i].resource == base[i].resource);
    FUZZ_CHECK(got[i].soft <= got[i].hard);
  }
  // Root: only lines that name root (or an exact uid 0) apply.
  LimitsUser root;
  root.name = "root";
  root.gids = {0};
  root.groups = {"root"};
  LimitsConf as_root(root, base);
  as_root.Apply(bytes);
  if (bytes.find("root") == std::string_view::npos && bytes.find(":0") == std::string_view::npos &&
      bytes.find("0:") == std::string_view::npos) {
    FUZZ_CHECK(as_root.Result() == LimitsConf(root, base).Result());
  }
  return 0;
}
