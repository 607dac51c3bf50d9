// #LTD lines: which lines count, how words split, what is refused.
#include "script_directives.h"

#include <gtest/gtest.h>

namespace ltd::test {
namespace {

std::vector<std::vector<std::string>> Tokens(std::string_view text) {
  auto d = ParseScriptDirectives(text, "job.sh");
  EXPECT_TRUE(d.ok()) << d.status();
  std::vector<std::vector<std::string>> out;
  if (d.ok()) {
    for (const ScriptDirective& s : *d) out.push_back(s.tokens);
  }
  return out;
}

TEST(ScriptDirectives, TopLinesUpToTheScriptsOwn) {
  EXPECT_EQ(Tokens("#!/bin/bash\n#LTD --devices 4 --name 'my job'\n\n# note\n"
                   "#LTD --time=1h # an hour\n#LTDX --ignored\necho hi\n#LTD --late\n"),
            (std::vector<std::vector<std::string>>{{"--devices", "4", "--name", "my job"},
                                                   {"--time=1h"}}));
  EXPECT_TRUE(Tokens("#LTD --devices 4\n").empty()) << "no #! line: no script of lines";
  EXPECT_TRUE(Tokens("#!/bin/sh\n#LTD --devices 4").empty()) << "a last line cut short";
  EXPECT_EQ(Tokens("#!/bin/sh\r\n#LTD\t--env \"A=b c\"\r\n"),
            (std::vector<std::vector<std::string>>{{"--env", "A=b c"}}));
}

TEST(ScriptDirectives, RefusesInOneLineNamingTheLine) {
  for (const std::string& bad :
       {std::string("#!/bin/sh\n\n#LTD --name 'open\n"),
        std::string("#!/bin/sh\n#LTD a\0b\n", 19), "#!/bin/sh\n#LTD" + std::string(300, ' ') + [] {
          std::string many;
          for (int i = 0; i < 300; ++i) many += " -x";
          return many;
        }() + "\n"}) {
    auto d = ParseScriptDirectives(bad, "job.sh");
    ASSERT_FALSE(d.ok()) << bad;
    const std::string m(d.status().message());
    EXPECT_EQ(m.rfind("job.sh:", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_NE(ParseScriptDirectives("#!/bin/sh\n\n#LTD --name 'open\n", "job.sh")
                .status()
                .message()
                .find("job.sh:3: #LTD: a ' is not closed"),
            std::string::npos);
}

}  // namespace
}  // namespace ltd::test
