// What the nodes of a run wrote under its prefix in etcd (rendezvous.h's
// keys), read. Anyone who can reach etcd can write there, so every key and
// value is hostile: a value of another type is absent, never a throw; a
// number in a key is a node of the run or nothing; text is bounded and
// escaped for display. No etcd client here, so each reader can be fuzzed
// alone (fuzz/rdzv_values_fuzzer.cc).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ltd::rdzv {

// A field of a value another node wrote: text as one line of at most
// `max` bytes, escaped; an integer, or nothing.
std::string JsonText(const nlohmann::json& j, const char* key, size_t max = 256);
std::optional<int64_t> JsonInt(const nlohmann::json& j, const char* key);

// The number after `head` in `key` ("nodes/3" -> 3): 1 to 6 digits, no
// leading zero (one key a node), else -1.
int NumberAfter(std::string_view key, std::string_view head);

// nodes/<r>: a node of the run, as it joined.
struct Member {
  int rank = -1;
  std::string host;
  int nnodes = 0;
  int devices = 0;
  int fence = 1;  // a node of a release before the fence's version said none
};
// The member `key` (under `prefix`) and `value` say, when `key` is a node
// of a run of `nnodes` (0..nnodes-1); nullopt for anything else.
std::optional<Member> ParseMember(const std::string& prefix, const std::string& key,
                                  const std::string& value, int nnodes);

// master: node 0's word on MASTER_ADDR and MASTER_PORT.
struct Master {
  std::string addr;
  int port = 0;
};
// nullopt when `value` is no host (letters, digits, ".-_:[]", at most 253)
// and port (1..65535).
std::optional<Master> ParseMaster(const nlohmann::json& value);

}  // namespace ltd::rdzv
