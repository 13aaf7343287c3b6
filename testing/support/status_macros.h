#ifndef MLA_TAIL_TESTING_SUPPORT_STATUS_MACROS_H_
#define MLA_TAIL_TESTING_SUPPORT_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "gtest/gtest.h"

// Fails the test (fatally) with the expression and its status unless it is OK.
#define ASSERT_OK(expr)                          \
  do {                                           \
    const absl::Status _s = (expr);              \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s; \
  } while (false)

// Fails the test (non-fatally) with the expression and its status unless it is OK.
#define EXPECT_OK(expr)                          \
  do {                                           \
    const absl::Status _s = (expr);              \
    EXPECT_TRUE(_s.ok()) << #expr << ": " << _s; \
  } while (false)

#endif  // MLA_TAIL_TESTING_SUPPORT_STATUS_MACROS_H_
