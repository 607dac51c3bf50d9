// Where ltd's helper programs (lt-exec, lt-shim) are: beside the running
// binary in a build tree, in `libexec_dir` once installed.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace ltd {

// `relative` beside the running binary (a build tree), or "".
inline std::string FindBeside(const std::string& relative) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const auto beside = self.parent_path() / relative;
  return access(beside.c_str(), F_OK) == 0 ? beside.string() : "";
}

// "" when it is in neither place.
inline std::string FindHelper(const std::string& name, const std::string& libexec_dir) {
  if (std::string beside = FindBeside(name); !beside.empty() && access(beside.c_str(), X_OK) == 0) {
    return beside;
  }
  const std::string installed = libexec_dir + "/" + name;
  if (access(installed.c_str(), X_OK) == 0) return installed;
  return "";
}

}  // namespace ltd
