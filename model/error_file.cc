#include "error_file.h"

#include <nlohmann/json.hpp>

#include "bytes.h"

namespace ltd {

std::optional<std::string> ErrorFileMessage(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return std::nullopt;
    return CutElided(text, kMaxErrorFileMessage);
  }
  if (!j.is_object()) return std::nullopt;
  const auto m = j.find("message");
  if (m == j.end()) return std::nullopt;
  if (m->is_string()) return CutElided(m->get_ref<const std::string&>(), kMaxErrorFileMessage);
  if (!m->is_object()) return std::nullopt;
  const auto inner = m->find("message");
  if (inner == m->end() || !inner->is_string()) return std::nullopt;
  return CutElided(inner->get_ref<const std::string&>(), kMaxErrorFileMessage);
}

}  // namespace ltd
