// Where ltd's helper programs (lt-exec, lt-shim) and its Python module are:
// beside the running binary in a build tree; once installed, relative to
// the running binary (`../libexec/ltd` from sbin/ or bin/), so that an
// install at any prefix finds its own, and last in the directories
// configured at build time.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

// The directories configured at build time (CMake passes the install
// prefix's), and the same relative to the installed binary's directory.
#ifndef LTD_LIBEXECDIR
#define LTD_LIBEXECDIR "/usr/local/libexec/ltd"
#endif
#ifndef LTD_PYTHONDIR
#define LTD_PYTHONDIR "/usr/local/share/ltd/python"
#endif
#ifndef LTD_LIBEXEC_FROM_BIN
#define LTD_LIBEXEC_FROM_BIN "../libexec/ltd"
#endif
#ifndef LTD_PYTHON_FROM_BIN
#define LTD_PYTHON_FROM_BIN "../share/ltd/python"
#endif

namespace ltd {

// `relative` resolved against the running binary's directory, if it
// exists there, or "".
inline std::string FindBeside(const std::string& relative) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const auto beside = (self.parent_path() / relative).lexically_normal();
  return access(beside.c_str(), F_OK) == 0 ? beside.string() : "";
}

// The executable `name`: beside the binary, in `from_self` relative to it,
// or in `configured`; "" when it is in none of them.
inline std::string FindHelper(const std::string& name, const std::string& from_self,
                              const std::string& configured) {
  for (const std::string& at : {FindBeside(name), FindBeside(from_self + "/" + name)}) {
    if (!at.empty() && access(at.c_str(), X_OK) == 0) return at;
  }
  const std::string installed = configured + "/" + name;
  if (access(installed.c_str(), X_OK) == 0) return installed;
  return "";
}

// The directory holding `file`: `beside` (a build tree's relative dir),
// `from_self` relative to the binary, else `configured` (which may not
// hold it: the caller checks).
inline std::string FindDirOf(const std::string& file, const std::string& beside,
                             const std::string& from_self, const std::string& configured) {
  for (const std::string& dir : {beside, from_self}) {
    if (!FindBeside(dir + "/" + file).empty()) {
      return std::filesystem::path(FindBeside(dir + "/" + file)).parent_path().string();
    }
  }
  return configured;
}

// The directory of ltd's automatic heartbeat module for Python ranks
// (sitecustomize.py): python/autoload beside the binary in a build tree,
// else where an install put it (the caller checks it holds the module).
inline std::string FindAutoHeartbeatDir() {
  return FindDirOf("sitecustomize.py", "python/autoload", LTD_PYTHON_FROM_BIN "/autoload",
                   LTD_PYTHONDIR "/autoload");
}

// Why helper `name` was not found for `program` (ltd, ltrun), as one line
// saying where it was looked for and what to do.
inline std::string HelperMissing(const std::string& name, const std::string& program) {
  return "cannot find " + name + " beside " + program +
         ", in " LTD_LIBEXEC_FROM_BIN " from it or in " LTD_LIBEXECDIR "; reinstall ltd";
}

}  // namespace ltd
