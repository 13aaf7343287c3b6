// The documents' code blocks are quotes of files that the build compiles or CI builds: each
// fenced block of README.md and docs/building.md in one of the languages below must be an ordered
// subsequence of the lines of ONE of that language's files (lines compared trimmed, blank lines
// aside). A quote may leave lines out; it may not add, reorder or mix lines of several files.
// Blocks in other languages (commands, formulas) are not quotes.

#include <map>
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

// The language of a fenced block (```cpp) and the files its lines may come from.
const std::map<std::string, Quoted>& QuotedLanguages() {
  static const auto* languages = new std::map<std::string, Quoted>{
      {"cpp", {{"examples/embedding_snippets.cc"}, 4}},
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

// A fenced block of a quoted language: its non-blank lines, trimmed, with their line numbers.
struct Block {
  std::string language;
  std::vector<std::string> lines;
  std::vector<int> numbers;
};

std::vector<Block> QuotedBlocks(const std::string& document) {
  std::vector<Block> blocks;
  bool in_block = false;
  Block* block = nullptr;  // the quoted block the line is in; null outside one
  int number = 0;
  for (const std::string& line : mla_tail_testing::ReadLines(document)) {
    ++number;
    const std::string trimmed = Trim(line);
    if (trimmed.rfind("```", 0) == 0) {
      in_block = !in_block;
      block = nullptr;
      if (in_block && QuotedLanguages().count(trimmed.substr(3)) > 0) {
        blocks.push_back({trimmed.substr(3), {}, {}});
        block = &blocks.back();
      }
      continue;
    }
    if (block == nullptr || trimmed.empty()) continue;
    block->lines.push_back(trimmed);
    block->numbers.push_back(number);
  }
  EXPECT_FALSE(in_block) << document << ": a code block is not closed";
  return blocks;
}

// How many of `quote`'s lines, from its first, appear in `file` in their order (the earliest
// match of each line is never worse than a later one, so one pass decides).
size_t QuotedPrefix(const std::vector<std::string>& quote, const std::vector<std::string>& file) {
  size_t matched = 0;
  for (const std::string& line : file) {
    if (matched < quote.size() && Trim(line) == quote[matched]) ++matched;
  }
  return matched;
}

TEST(ReadmeSnippetsTest, QuotedPrefixIsAnOrderedSubsequenceOfOneFile) {
  const std::vector<std::string> file = {"int a = 1;", "  int b = 2;", "", "int c = 3;"};
  EXPECT_EQ(QuotedPrefix({"int a = 1;", "int c = 3;"}, file), 2u);  // lines left out
  EXPECT_EQ(QuotedPrefix({"int b = 2;", "int a = 1;"}, file), 1u);  // reordered
  EXPECT_EQ(QuotedPrefix({"int a = 1;", "int d = 4;"}, file), 1u);  // another file's line
  EXPECT_EQ(QuotedPrefix({"int a = 1;", "int a = 1;"}, file), 1u);  // a line quoted twice
}

TEST(ReadmeSnippetsTest, EveryQuotedBlockIsAnExcerptOfOneBuiltFile) {
  std::map<std::string, std::vector<std::string>> files;  // path -> lines
  for (const auto& [language, quoted] : QuotedLanguages()) {
    for (const std::string& file : quoted.files) files[file] = mla_tail_testing::ReadLines(file);
  }
  ASSERT_GT(files["examples/embedding_snippets.cc"].size(), 50u);
  std::map<std::string, int> blocks;
  int quoted = 0;
  for (const char* document : kDocuments) {
    for (const Block& block : QuotedBlocks(document)) {
      ++blocks[block.language];
      quoted += static_cast<int>(block.lines.size());
      size_t best = 0;
      std::string best_file;
      for (const std::string& file : QuotedLanguages().at(block.language).files) {
        const size_t matched = QuotedPrefix(block.lines, files[file]);
        if (matched > best || best_file.empty()) {
          best = matched;
          best_file = file;
        }
      }
      if (block.lines.empty() || best == block.lines.size()) continue;
      ADD_FAILURE() << document << ":" << block.numbers[best] << " (" << block.language
                    << ") does not follow the block's earlier lines in any one file it may quote"
                    << " (the closest, " << best_file << ", has " << best << " of the block's "
                    << block.lines.size() << " lines in order): " << block.lines[best];
    }
  }
  for (const auto& [language, quoted_language] : QuotedLanguages()) {
    EXPECT_GE(blocks[language], quoted_language.min_blocks) << language;
  }
  EXPECT_GT(quoted, 40);
}

}  // namespace
}  // namespace mla_tail_examples
