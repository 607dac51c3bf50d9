// String building without surprises: Debian's Abseil has its own
// string_view type, distinct from std::string_view, so its StrCat does not
// take ours. These cover what ltd needs.
#pragma once

#include <concepts>
#include <string>
#include <string_view>
#include <vector>

namespace ltd {

namespace strings_internal {
inline void Append(std::string& out, std::string_view s) { out.append(s); }
inline void Append(std::string& out, const char* s) { out.append(s); }
inline void Append(std::string& out, char c) { out.push_back(c); }
template <std::integral T>
requires(!std::same_as<T, char> && !std::same_as<T, bool>) void Append(std::string& out, T v) {
  out.append(std::to_string(v));
}
// Anything with data() and size() of chars, e.g. absl::string_view.
template <typename T>
requires requires(const T& t) {
  { t.data() } -> std::convertible_to<const char*>;
  { t.size() } -> std::convertible_to<size_t>;
} &&(!std::convertible_to<T, std::string_view>)void Append(std::string& out, const T& s) {
  out.append(s.data(), s.size());
}
}  // namespace strings_internal

template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (strings_internal::Append(out, args), ...);
  return out;
}

// argv or envp for exec: pointers into `strings`, which must outlive it,
// then the null that ends it.
inline std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}
// Of strings about to be destroyed the pointers would dangle.
std::vector<char*> CStrings(std::vector<std::string>&& strings) = delete;

template <typename Container>
std::string Join(const Container& items, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out.append(sep);
    first = false;
    strings_internal::Append(out, item);
  }
  return out;
}

// The parts are views into `s`: it must outlive them.
inline std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}
// Not of a string about to be destroyed: `for (auto part :
// Split(ReadFile(p), ','))` would read freed memory (before C++23 a
// range-for keeps only the outermost temporary alive). Hold it first.
template <typename S>
requires std::same_as<S, std::string> void Split(S&&, char) = delete;

}  // namespace ltd
