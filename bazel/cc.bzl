"""The project's C++ rules: Bazel's native ones with the language standard set per target.

Our targets compile as C++17 whatever the workspace's flags say, so a workspace that uses
mla_tail needs no --cxxopt of its own (the public headers still need C++17 or later in the
code that includes them). BUILD files load these under the native names:

    load("//bazel:cc.bzl", "cc_binary", "cc_library", "cc_test")
"""

MLA_TAIL_COPTS = ["-std=c++17"]

def _with_copts(kwargs):
    kwargs["copts"] = MLA_TAIL_COPTS + kwargs.pop("copts", [])
    return kwargs

def cc_library(**kwargs):
    native.cc_library(**_with_copts(kwargs))

def cc_binary(**kwargs):
    native.cc_binary(**_with_copts(kwargs))

def cc_test(**kwargs):
    native.cc_test(**_with_copts(kwargs))
