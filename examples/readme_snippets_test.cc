// The documents' code blocks are quotes of files that the build compiles or CI builds: every
// line of a fenced block of README.md and docs/building.md in one of the languages below must be
// a line of one of that language's files. Blocks in other languages (commands, formulas) are not
// quotes.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/support/text_file.h"

namespace mla_tail_examples {
namespace {

struct Quoted {
  std::vector<std::string> files;  // runfiles paths (examples/runtime is the repository
                                   // @example_runtime: ../example_runtime/)
  int min_blocks;                  // in all documents together
};

// The language of a fenced block (```cpp) and the files its lines must come from.
const std::map<std::string, Quoted>& QuotedLanguages() {
  static const auto* languages = new std::map<std::string, Quoted>{
      {"cpp", {{"examples/embedding_snippets.cc"}, 5}},
      {"python",  // Bazel's Starlark: a consumer's WORKSPACE and BUILD files
       {{"../example_runtime/WORKSPACE", "../example_runtime/BUILD",
         "../example_runtime/plugin/BUILD"},
        2}},
      {"cmake", {{"examples/cmake_consumer/CMakeLists.txt", "CMakeLists.txt"}, 1}},
  };
  return *languages;
}

const char* const kDocuments[] = {"README.md", "docs/building.md"};

std::string Trim(const std::string& line) {
  const size_t begin = line.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const size_t end = line.find_last_not_of(" \t\r");
  return line.substr(begin, end - begin + 1);
}

using ::mla_tail_testing::ReadLines;

TEST(ReadmeSnippetsTest, EveryQuotedLineIsInTheBuiltFiles) {
  std::map<std::string, std::set<std::string>> built;  // language -> trimmed lines
  for (const auto& [language, quoted] : QuotedLanguages()) {
    for (const std::string& file : quoted.files) {
      for (const std::string& line : ReadLines(file)) built[language].insert(Trim(line));
    }
  }
  ASSERT_GT(built["cpp"].size(), 50u);
  std::map<std::string, int> blocks;
  int quoted = 0;
  for (const char* document : kDocuments) {
    std::string language;  // of the quoted block the line is in; empty outside one
    bool in_block = false;
    int number = 0;
    for (const std::string& line : ReadLines(document)) {
      ++number;
      const std::string trimmed = Trim(line);
      if (trimmed.rfind("```", 0) == 0) {
        in_block = !in_block;
        language = in_block && QuotedLanguages().count(trimmed.substr(3)) ? trimmed.substr(3) : "";
        blocks[language] += !language.empty();
        continue;
      }
      if (language.empty() || trimmed.empty()) continue;
      ++quoted;
      EXPECT_EQ(built[language].count(trimmed), 1u)
          << document << ":" << number << " (" << language
          << ") is not a line of the files it quotes: " << trimmed;
    }
    EXPECT_FALSE(in_block) << document << ": a code block is not closed";
  }
  for (const auto& [language, quoted_language] : QuotedLanguages()) {
    EXPECT_GE(blocks[language], quoted_language.min_blocks) << language;
  }
  EXPECT_GT(quoted, 40);
}

}  // namespace
}  // namespace mla_tail_examples
