// What `--json` prints: protobuf's JSON mapping of the API messages (field
// names as in proto/ltd.proto, enums by name, times RFC 3339), completed so
// that scripts can rely on it: every field is present (an absent message or
// optional field is null), and 64-bit integers are JSON numbers, as ltd's
// records have always had them, rather than the mapping's strings.
#pragma once

#include <google/protobuf/message.h>

#include <nlohmann/json.hpp>

namespace ltd {

nlohmann::json ToJsonValue(const google::protobuf::Message& message);

}  // namespace ltd
