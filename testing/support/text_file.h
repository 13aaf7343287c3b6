#ifndef MLA_TAIL_TESTING_SUPPORT_TEXT_FILE_H_
#define MLA_TAIL_TESTING_SUPPORT_TEXT_FILE_H_

// The lines of a file of the repository (a test's data), for the tests that check documents
// against the code they describe.

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace mla_tail_testing {

// The lines of `path`, relative to the test's working directory; a test failure when it cannot
// be read.
inline std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  return lines;
}

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_TEXT_FILE_H_
