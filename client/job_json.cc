#include "job_json.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace ltd {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

template <typename T>
void ToNumber(nlohmann::json& v) {
  if (!v.is_string()) return;
  const std::string& s = v.get_ref<const std::string&>();
  T n{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec == std::errc() && end == s.data() + s.size()) v = n;
}

void Complete(nlohmann::json& object, const Descriptor& type) {
  if (!object.is_object()) return;
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor& field = *type.field(i);
    auto it = object.find(field.name());
    if (it == object.end()) {
      object[field.name()] = field.is_repeated() ? nlohmann::json::array() : nlohmann::json();
      continue;
    }
    auto fix = [&](nlohmann::json& v) {
      switch (field.cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT64:
          return ToNumber<int64_t>(v);
        case FieldDescriptor::CPPTYPE_UINT64:
          return ToNumber<uint64_t>(v);
        case FieldDescriptor::CPPTYPE_MESSAGE:
          // Well-known types such as Timestamp are no JSON objects.
          return Complete(v, *field.message_type());
        default:
          return;
      }
    };
    if (field.is_repeated() && it->is_array()) {
      for (auto& v : *it) fix(v);
    } else {
      fix(*it);
    }
  }
}

// Erases `path` ("a.b.c") under `v`, through arrays on the way.
void Erase(nlohmann::json& v, std::string_view path) {
  if (v.is_array()) {
    for (auto& e : v) Erase(e, path);
    return;
  }
  if (!v.is_object()) return;
  const size_t dot = path.find('.');
  const std::string key(path.substr(0, dot));
  if (dot == std::string_view::npos) {
    v.erase(key);
    return;
  }
  if (auto it = v.find(key); it != v.end()) Erase(*it, path.substr(dot + 1));
}

}  // namespace

nlohmann::json JobToJson(const v1::Job& job) {
  nlohmann::json j = ToJsonValue(job);
  for (const std::string& path : job.hidden()) {
    if (path != "argv") Erase(j, path);
  }
  return j;
}

nlohmann::json ToJsonValue(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) {
    return nlohmann::json::object();  // only for an unknown type; ours are known
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return nlohmann::json::object();
  Complete(j, *message.GetDescriptor());
  return j;
}

}  // namespace ltd
