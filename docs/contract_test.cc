// docs/spec.md owns the contract's tables; what repeats them elsewhere is checked against it:
// - its errors table: README.md's and mla/errors.h's list the same codes in the same order, and
//   each is an absl::StatusCode;
// - its headers table: exactly the cc_library targets of mla/BUILD and graph/BUILD that every
//   workspace may see, each with exactly its headers, and exactly the targets cmake/BUILD
//   exports to CMake consumers; every @mla_tail target the README names is one of them.

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "testing/support/text_file.h"

namespace mla_tail_docs {
namespace {

using ::mla_tail_testing::ReadLines;

std::string Text(const std::string& path) {
  std::string text;
  for (const std::string& line : ReadLines(path)) text += line + "\n";
  return text;
}

// A cell without its Markdown code quotes and C++ string quotes.
std::string Bare(absl::string_view cell) {
  cell = absl::StripAsciiWhitespace(cell);
  absl::ConsumePrefix(&cell, "`");
  absl::ConsumeSuffix(&cell, "`");
  absl::ConsumePrefix(&cell, "\"");
  absl::ConsumeSuffix(&cell, "\"");
  return std::string(cell);
}

// The body rows of the first table after the line `heading`, as cells.
std::vector<std::vector<std::string>> TableAfter(const std::string& path,
                                                 const std::string& heading) {
  const std::vector<std::string> lines = ReadLines(path);
  std::vector<std::vector<std::string>> rows;
  size_t i = 0;
  while (i < lines.size() && lines[i] != heading) ++i;
  EXPECT_LT(i, lines.size()) << path << " has no line " << heading;
  while (i < lines.size() && !absl::StartsWith(lines[i], "|")) ++i;
  for (i += 2; i < lines.size() && absl::StartsWith(lines[i], "|"); ++i) {
    std::vector<std::string> cells;
    absl::string_view row = lines[i];
    absl::ConsumePrefix(&row, "|");
    absl::ConsumeSuffix(&row, "|");
    for (absl::string_view cell : absl::StrSplit(row, '|')) cells.push_back(Bare(cell));
    rows.push_back(cells);
  }
  return rows;
}

std::vector<std::string> FirstColumn(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::string> column;
  for (const auto& row : rows) column.push_back(row.front());
  return column;
}

// "InvalidArgument" as absl names its code: "INVALID_ARGUMENT".
std::string UpperSnake(const std::string& camel) {
  std::string out;
  for (char c : camel) {
    if (absl::ascii_isupper(c) && !out.empty()) out += '_';
    out += absl::ascii_toupper(c);
  }
  return out;
}

TEST(ContractTest, ErrorCodesAreTheSpecsEverywhere) {
  const std::vector<std::string> spec = FirstColumn(TableAfter("docs/spec.md", "## Errors"));
  ASSERT_GE(spec.size(), 8u);
  std::set<std::string> absl_codes;
  for (int code = 1; code <= 16; ++code) {
    absl_codes.insert(absl::StatusCodeToString(static_cast<absl::StatusCode>(code)));
  }
  for (const std::string& code : spec) {
    EXPECT_EQ(absl_codes.count(UpperSnake(code)), 1u) << code << " is no absl::StatusCode";
  }
  EXPECT_EQ(FirstColumn(TableAfter("README.md", "## Errors")), spec)
      << "README.md's errors table lists other codes than docs/spec.md's";

  // mla/errors.h: the comment lines "//   Code   meaning   what to do" after the header line
  // "//   code ...", up to the next empty comment line; continuation lines are indented further.
  std::vector<std::string> header;
  bool in_table = false;
  for (const std::string& line : ReadLines("mla/errors.h")) {
    if (!in_table) {
      in_table = absl::StartsWith(line, "//   code ");
      continue;
    }
    if (line == "//") break;
    if (line.size() > 5 && absl::StartsWith(line, "//   ") && line[5] != ' ') {
      const std::string row = line.substr(5);
      header.push_back(row.substr(0, row.find(' ')));
    }
  }
  EXPECT_EQ(header, spec) << "mla/errors.h's table lists other codes than docs/spec.md's";
}

// (target, header) of every cc_library in `package`'s BUILD file that every workspace may see.
std::set<std::pair<std::string, std::string>> PublicHeaders(const std::string& package) {
  const std::string build = Text(package + "/BUILD");
  std::set<std::pair<std::string, std::string>> found;
  const auto quoted = [](absl::string_view text, absl::string_view key) {
    const size_t at = text.find(key);
    if (at == absl::string_view::npos) return std::string();
    const size_t begin = text.find('"', at) + 1;
    return std::string(text.substr(begin, text.find('"', begin) - begin));
  };
  for (size_t at = build.find("\ncc_library("); at != std::string::npos;
       at = build.find("\ncc_library(", at + 1)) {
    const absl::string_view block = absl::string_view(build).substr(at, build.find("\n)", at) - at);
    if (!absl::StrContains(block, "\"//visibility:public\"")) continue;
    const std::string target = "//" + package + ":" + quoted(block, "name = ");
    const std::string prefix = quoted(block, "include_prefix = ");
    EXPECT_FALSE(prefix.empty()) << target << " is public without an include_prefix";
    const size_t hdrs = block.find("hdrs = [");
    EXPECT_NE(hdrs, absl::string_view::npos) << target << " is public without headers";
    if (hdrs == absl::string_view::npos) continue;
    const absl::string_view list = block.substr(hdrs, block.find(']', hdrs) - hdrs);
    for (size_t q = list.find('"'); q != absl::string_view::npos;
         q = list.find('"', list.find('"', q + 1) + 1)) {
      const size_t end = list.find('"', q + 1);
      found.insert({target, prefix + "/" + std::string(list.substr(q + 1, end - q - 1))});
    }
  }
  return found;
}

TEST(ContractTest, PublicTargetsAreTheSpecsHeadersTable) {
  std::set<std::pair<std::string, std::string>> spec;
  std::set<std::string> targets;
  for (const auto& row : TableAfter("docs/spec.md", "## Headers")) {
    ASSERT_EQ(row.size(), 3u);
    spec.insert({row[0], row[1]});
    targets.insert(row[0]);
  }
  ASSERT_GE(spec.size(), 9u);
  std::set<std::pair<std::string, std::string>> built = PublicHeaders("mla");
  for (const auto& entry : PublicHeaders("graph")) built.insert(entry);
  EXPECT_EQ(built, spec) << "the public targets and headers of mla/BUILD and graph/BUILD differ "
                            "from docs/spec.md's headers table";

  // cmake/BUILD: the `public = [...]` list of the CMake build's exported libraries.
  const std::string cmake = Text("cmake/BUILD");
  const size_t list = cmake.find("public = [");
  ASSERT_NE(list, std::string::npos) << "cmake/BUILD lists no public targets";
  std::set<std::string> exported;
  for (absl::string_view entry :
       absl::StrSplit(absl::string_view(cmake).substr(list, cmake.find(']', list) - list), '"')) {
    if (absl::StartsWith(entry, "//")) exported.insert(std::string(entry));
  }
  EXPECT_EQ(exported, targets) << "cmake/BUILD's public targets differ from docs/spec.md's";

  const std::string readme = Text("README.md");
  int named = 0;
  for (size_t at = readme.find("@mla_tail//"); at != std::string::npos;
       at = readme.find("@mla_tail//", at + 1)) {
    const size_t begin = at + std::string("@mla_tail").size();
    const size_t end = readme.find_first_not_of("abcdefghijklmnopqrstuvwxyz_/:", begin);
    const std::string target = readme.substr(begin, end - begin);
    if (end < readme.size() && readme[end] == '.') continue;  // a file: repositories.bzl
    ++named;
    EXPECT_EQ(targets.count(target), 1u)
        << "README.md names " << target << ", not a public target of docs/spec.md";
  }
  EXPECT_GT(named, 0);
}

}  // namespace
}  // namespace mla_tail_docs
