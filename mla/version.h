#ifndef MLA_TAIL_MLA_VERSION_H_
#define MLA_TAIL_MLA_VERSION_H_

// The library's version (CHANGELOG.md). The major number changes when the public headers change
// incompatibly; before 1.0 the minor number does.

#define MLA_TAIL_VERSION_MAJOR 0
#define MLA_TAIL_VERSION_MINOR 3
#define MLA_TAIL_VERSION_PATCH 0

namespace mla_tail {

// "MAJOR.MINOR.PATCH" of the library linked in, to compare with the headers' macros.
const char* Version();

}  // namespace mla_tail

#endif  // MLA_TAIL_MLA_VERSION_H_
