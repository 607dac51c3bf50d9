#include "run_keys.h"

#include "bytes.h"

namespace ltd::rdzv {

std::string JsonText(const nlohmann::json& j, const char* key, size_t max) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return DisplayEscapeElided(it->get_ref<const std::string&>(), max, Controls::kEscape);
}

std::optional<int64_t> JsonInt(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

int NumberAfter(std::string_view key, std::string_view head) {
  if (!key.starts_with(head) || key.size() == head.size() || key.size() - head.size() > 6) {
    return -1;
  }
  // Written as ltd writes it, or no number: "nodes/01" would be a second
  // key of node 1's.
  if (key[head.size()] == '0' && key.size() - head.size() > 1) return -1;
  int n = 0;
  for (char c : key.substr(head.size())) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

std::optional<Member> ParseMember(const std::string& prefix, const std::string& key,
                                  const std::string& value, int nnodes) {
  if (!key.starts_with(prefix)) return std::nullopt;
  Member m;
  m.rank = NumberAfter(std::string_view(key).substr(prefix.size()), "nodes/");
  if (m.rank < 0 || m.rank >= nnodes) return std::nullopt;
  const auto j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  m.host = JsonText(j, "host");
  // Out of int's range is no count a node would give: 0, which no node
  // agrees with.
  const auto small = [](std::optional<int64_t> v, int otherwise) {
    return v && *v >= 0 && *v <= (1 << 30) ? static_cast<int>(*v) : otherwise;
  };
  m.nnodes = small(JsonInt(j, "nnodes"), 0);
  m.devices = small(JsonInt(j, "devices"), 0);
  m.fence = small(JsonInt(j, "fence"), 1);
  return m;
}

std::optional<Master> ParseMaster(const nlohmann::json& value) {
  if (!value.is_object()) return std::nullopt;
  auto it = value.find("addr");
  if (it == value.end() || !it->is_string()) return std::nullopt;
  const std::string& addr = it->get_ref<const std::string&>();
  const int64_t port = JsonInt(value, "port").value_or(0);
  if (addr.empty() || addr.size() > 253 ||
      addr.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                             "0123456789.-_:[]") != std::string::npos ||
      port < 1 || port > 65535) {
    return std::nullopt;
  }
  return Master{addr, static_cast<int>(port)};
}

}  // namespace ltd::rdzv
