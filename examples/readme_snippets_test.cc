// The README's C++ samples are quotes of examples/embedding_snippets.cc, which the suite compiles
// and runs: every line of every ```cpp block of README.md must be a line of that file.

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace mla_tail_examples {
namespace {

std::string Trim(const std::string& line) {
  const size_t begin = line.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const size_t end = line.find_last_not_of(" \t\r");
  return line.substr(begin, end - begin + 1);
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  return lines;
}

TEST(ReadmeSnippetsTest, EveryQuotedLineIsInTheCompiledExamples) {
  std::set<std::string> compiled;
  for (const std::string& line : Lines("examples/embedding_snippets.cc")) {
    compiled.insert(Trim(line));
  }
  ASSERT_GT(compiled.size(), 50u);
  int blocks = 0, quoted = 0;
  bool in_cpp = false;
  int number = 0;
  for (const std::string& line : Lines("README.md")) {
    ++number;
    const std::string trimmed = Trim(line);
    if (trimmed.rfind("```", 0) == 0) {
      in_cpp = !in_cpp && trimmed == "```cpp";
      blocks += in_cpp;
      continue;
    }
    if (!in_cpp || trimmed.empty()) continue;
    ++quoted;
    EXPECT_EQ(compiled.count(trimmed), 1u)
        << "README.md:" << number << " is not in examples/embedding_snippets.cc: " << trimmed;
  }
  EXPECT_GE(blocks, 5);
  EXPECT_GT(quoted, 30);
}

}  // namespace
}  // namespace mla_tail_examples
