// What a rank's start parses (process/rank_start.h): the start of the
// program the user named, its `#!` line (MayRunPython), and a list of
// groups (ParseGroupList). Input: PATH \0 HEAD, and the whole input as a
// list. Invariants: the answer for a file depends on its first line alone
// and a python name is always one; a list parsed is digits and commas
// only, each gid below (gid_t)-1, within the capacity, and parses again
// the same once written back.
#include <algorithm>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "rank_start.h"

using namespace ltd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view path = input.substr(0, nul);
  std::string_view head =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  if (head.size() > 256) head = head.substr(0, 256);  // what the start reads
  const bool python = MayRunPython(path, head);
  FUZZ_CHECK(MayRunPython(path, head.substr(0, head.find('\n'))) == python);
  FUZZ_CHECK(MayRunPython(std::string(path) + "/python3", head));

  constexpr size_t kCapacity = 64;
  gid_t groups[kCapacity];
  size_t count = 0;
  const GroupListError error =
      ParseGroupList(input.data(), input.size(), groups, kCapacity, &count);
  FUZZ_CHECK(count <= kCapacity);
  if (error != GroupListError::kNone) return 0;
  FUZZ_CHECK(input.find_first_not_of("0123456789,") == std::string_view::npos);
  FUZZ_CHECK(count == static_cast<size_t>(std::count(input.begin(), input.end(), ',')) + 1);
  std::string again;
  for (size_t i = 0; i < count; ++i) {
    FUZZ_CHECK(groups[i] != static_cast<gid_t>(-1));
    again += (i == 0 ? "" : ",") + std::to_string(groups[i]);
  }
  gid_t reparsed[kCapacity];
  size_t count2 = 0;
  FUZZ_CHECK(ParseGroupList(again.data(), again.size(), reparsed, kCapacity, &count2) ==
             GroupListError::kNone);
  FUZZ_CHECK(count2 == count);
  for (size_t i = 0; i < count; ++i) FUZZ_CHECK(reparsed[i] == groups[i]);
  return 0;
}
