// In a sanitized build (cmake/sanitize.cmake), every test program fails
// when a sanitizer report appeared while it ran: a report of a helper it
// started (ltd, lt-shim, lt-exec, lt-userio) goes to a file, not to the
// test's output, and would otherwise pass unseen. (With two tests at
// once, a report may be named by both; scripts/sanitize.sh lists them all
// at the end too.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace ltd::test {
namespace {

class SanitizerReports : public ::testing::Environment {
 public:
  void SetUp() override { before_ = Reports(); }
  void TearDown() override {
    for (const std::string& report : Reports()) {
      if (before_.count(report) != 0) continue;
      std::ifstream in(report);
      std::ostringstream text;
      text << in.rdbuf();
      ADD_FAILURE() << "a sanitizer report appeared while this test ran: " << report << "\n"
                    << text.str().substr(0, 8000);
    }
  }

 private:
  static std::set<std::string> Reports() {
    std::set<std::string> out;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(LT_SANITIZER_REPORTS, ec), end; !ec && it != end;
         it.increment(ec)) {
      out.insert(it->path().string());
    }
    return out;
  }
  std::set<std::string> before_;
};

[[maybe_unused]] const auto* const kRegistered =
    ::testing::AddGlobalTestEnvironment(new SanitizerReports);

}  // namespace
}  // namespace ltd::test
