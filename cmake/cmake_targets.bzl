"""cmake_targets: the CMake build's target list (targets.cmake), generated from the Bazel targets.

An aspect walks the `deps` of the public targets and writes one `mla_tail_library()` call per
library of this repository (cc_library and cuda_library): its sources, headers, include prefix,
options and dependencies. Dependencies outside the repository become the CMake targets of the
same libraries (Abseil's CMake package, FindCUDAToolkit). The nvcc flags come from
tools/cuda/defs.bzl. The CMake build (../CMakeLists.txt) includes the result, so both builds
compile the same files with the same nvcc flags; //cmake:targets_test fails when the committed
targets.cmake differs from what this rule generates.
"""

load("//bazel:cc.bzl", "MLA_TAIL_COPTS")
load("//tools/cuda:defs.bzl", "CUDA_ARCH_FLAGS", "NVCC_FLAGS")

# The libraries of other repositories that this repository's libraries use, as CMake targets.
_EXTERNAL = {
    "mla_tail_cuda": {
        "headers": "mla_tail_cuda_headers",  # defined by ../CMakeLists.txt
        "cudart": "CUDA::cudart_static",
        "cublaslt": "CUDA::cublasLt",
        "library_dir": "mla_tail_cuda_library_dir",  # defined by ../CMakeLists.txt
    },
}

_KINDS = {"cc_library": "cc", "cuda_library": "cuda"}

CMakeTargetsInfo = provider(
    doc = "The mla_tail_library() calls of a target and of the libraries it depends on.",
    fields = {"calls": "depset of strings"},
)

def _cmake_dependency(dep):
    label = dep.label
    if not label.workspace_name:
        return "//{}:{}".format(label.package, label.name)
    if label.workspace_name == "com_google_absl":
        return "absl::" + label.name
    targets = _EXTERNAL.get(label.workspace_name, {})
    if label.name not in targets:
        fail("{} has no CMake equivalent: add it to cmake/cmake_targets.bzl".format(label))
    return targets[label.name]

def _paths(files):
    for f in files:
        if not f.is_source:
            fail("{} is generated: the CMake build takes source files only".format(f.path))
    return sorted([f.short_path for f in files])

def _quoted(values):
    return " ".join(['"{}"'.format(v) for v in values])

def _cmake_targets_aspect_impl(target, ctx):
    deps = getattr(ctx.rule.attr, "deps", [])
    transitive = [d[CMakeTargetsInfo].calls for d in deps if CMakeTargetsInfo in d]
    if target.label.workspace_name or ctx.rule.kind not in _KINDS:
        return [CMakeTargetsInfo(calls = depset(transitive = transitive))]
    attr = ctx.rule.attr
    for unsupported in ["strip_include_prefix", "includes"]:
        if getattr(attr, unsupported, None):
            fail("{}: {} has no CMake equivalent here".format(target.label, unsupported))
    files = ctx.rule.files
    srcs = _paths(files.srcs + getattr(files, "textual_hdrs", []))
    copts = [c for c in attr.copts if c not in MLA_TAIL_COPTS]
    lines = ["mla_tail_library(//{}:{}".format(target.label.package, target.label.name)]
    lines.append("  KIND {}".format(_KINDS[ctx.rule.kind]))
    sections = [
        ("PACKAGE", [target.label.package]),
        ("INCLUDE_PREFIX", [getattr(attr, "include_prefix", "")]),
        ("SRCS", srcs),
        ("HDRS", _paths(files.hdrs)),
        ("COPTS", copts),
        ("DEFINES", getattr(attr, "defines", []) + getattr(attr, "local_defines", [])),
        ("LINKOPTS", getattr(attr, "linkopts", [])),
        ("DEPS", sorted([_cmake_dependency(d) for d in deps])),
    ]
    for keyword, values in sections:
        values = [v for v in values if v]
        if values:
            lines.append("  {} {}".format(keyword, _quoted(values)))
    call = "\n".join(lines) + ")\n"
    return [CMakeTargetsInfo(calls = depset([call], transitive = transitive))]

cmake_targets_aspect = aspect(
    implementation = _cmake_targets_aspect_impl,
    attr_aspects = ["deps"],
)

_HEADER = """\
# Generated from the Bazel targets by //cmake:targets (tools/update_cmake_targets.sh): do not
# edit. //cmake:targets_test fails when this file and the Bazel targets differ.

# tools/cuda/defs.bzl: every nvcc flag of the project.
set(MLA_TAIL_NVCC_FLAGS {nvcc_flags})

# The public targets (mla_tail::<name>); every other library is internal.
set(MLA_TAIL_PUBLIC_TARGETS {public})

"""

def _cmake_targets_impl(ctx):
    calls = depset(transitive = [t[CMakeTargetsInfo].calls for t in ctx.attr.public]).to_list()
    public = ["//{}:{}".format(t.label.package, t.label.name) for t in ctx.attr.public]
    text = _HEADER.format(
        nvcc_flags = _quoted(NVCC_FLAGS + CUDA_ARCH_FLAGS),
        public = _quoted(public),
    ) + "\n".join(sorted(calls))
    ctx.actions.write(ctx.outputs.out, text)
    return [DefaultInfo(
        files = depset([ctx.outputs.out]),
        runfiles = ctx.runfiles(files = [ctx.outputs.out]),
    )]

cmake_targets = rule(
    implementation = _cmake_targets_impl,
    doc = "Writes the CMake target list of `public` and every library they depend on.",
    attrs = {
        "public": attr.label_list(aspects = [cmake_targets_aspect], mandatory = True),
        "out": attr.output(mandatory = True),
    },
)
