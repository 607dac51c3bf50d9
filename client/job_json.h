// What `--json` prints: protobuf's JSON mapping of the API messages (field
// names as in proto/ltd.proto, enums by name, times RFC 3339), completed so
// that scripts can rely on it: every field is present (an absent message or
// optional field is null), and 64-bit integers are JSON numbers, as ltd's
// records have always had them, rather than the mapping's strings.
#pragma once

#include <google/protobuf/message.h>

#include <nlohmann/json.hpp>

#include "ltd.pb.h"

namespace ltd {

nlohmann::json ToJsonValue(const google::protobuf::Message& message);

// A job as ToJsonValue has it, less the fields ltd hid from this caller
// (another user's job): each path its `hidden` names ("cwd",
// "ranks.error", ...) is absent rather than empty, so that no script takes
// "" for the job's real value. argv, listed when its arguments are hidden,
// stays with the program alone.
nlohmann::json JobToJson(const v1::Job& job);

}  // namespace ltd
