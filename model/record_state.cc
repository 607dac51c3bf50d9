#include "record_state.h"

#include <nlohmann/json.hpp>

namespace ltd {

std::optional<std::pair<std::string, JobState>> RecordIdAndState(std::string_view text) {
  using Event = nlohmann::json::parse_event_t;
  // Only the top level's "id" and "state" are built; everything else is
  // scanned and dropped, nested objects and arrays unbuilt.
  auto keep = [](int depth, Event event, nlohmann::json& parsed) {
    if (event == Event::key && depth == 1) return parsed == "id" || parsed == "state";
    if (depth > 1 && (event == Event::object_start || event == Event::array_start)) return false;
    return true;
  };
  const nlohmann::json parsed = nlohmann::json::parse(text, keep, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return std::nullopt;
  auto id = parsed.find("id");
  auto state = parsed.find("state");
  if (id == parsed.end() || state == parsed.end() || !id->is_string() || !state->is_string())
    return std::nullopt;
  auto s = ParseJobState(state->get_ref<const std::string&>());
  if (!s) return std::nullopt;
  return std::pair{id->get<std::string>(), *s};
}

}  // namespace ltd
