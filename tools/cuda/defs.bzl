"""cuda_library: compiles .cu files with nvcc and returns CcInfo.

Plain cc_library / cc_test / cc_binary targets depend on a cuda_library as on any C++
library. Headers and include paths come from `hdrs` and from the deps' CcInfo. Every nvcc
flag of the project is set here, in one place.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

# nvcc of the toolkit that repositories.bzl declares as @mla_tail_cuda.
load("@mla_tail_cuda//:toolkit.bzl", "NVCC")

# Native Hopper code (mma.sync, griddepcontrol), not PTX left to the driver; sm_90a for wgmma.
CUDA_ARCH_FLAGS = ["-gencode=arch=compute_90a,code=sm_90a"]

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-lineinfo",  # source lines for compute-sanitizer and ncu; no effect on code
    "-Xcompiler=-fPIC",
    "-Xcompiler=-O2",
    "-Xptxas=-warn-spills",
    "--expt-relaxed-constexpr",
    "-Werror=all-warnings",
]

def _join(base, path):
    return base + "/" + path if path else base

def _cuda_library_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    host_compiler = cc_common.get_tool_for_action(
        feature_configuration = feature_configuration,
        action_name = "c++-compile",
    )

    dep_infos = [d[CcInfo] for d in ctx.attr.deps]
    deps_cc = cc_common.merge_cc_infos(cc_infos = dep_infos)
    deps_compilation = deps_cc.compilation_context
    own_compilation = cc_common.create_compilation_context(
        headers = depset(ctx.files.hdrs),
    )

    # The owning repository's root (and its generated-file roots), so that "mla/kernels/params.h"
    # resolves when this repository is an external one (@mla_tail in a consumer's workspace:
    # external/mla_tail, bazel-out/.../bin/external/mla_tail). nvcc's device pass knows no
    # -iquote: quote include paths become -I.
    root = ctx.label.workspace_root
    include_dirs = [
        root or ".",
        _join(ctx.bin_dir.path, root),
        _join(ctx.genfiles_dir.path, root),
    ]
    include_dirs += deps_compilation.includes.to_list()
    include_dirs += deps_compilation.quote_includes.to_list()
    system_dirs = deps_compilation.system_includes.to_list()
    inputs = depset(
        ctx.files.srcs + ctx.files.hdrs + ctx.files.textual_hdrs,
        transitive = [deps_compilation.headers],
    )

    objects = []
    for src in ctx.files.srcs:
        if src.extension != "cu":
            continue
        obj = ctx.actions.declare_file(
            "_objs/{}/{}.o".format(ctx.label.name, src.basename[:-len(".cu")]),
        )
        args = ctx.actions.args()
        args.add_all(NVCC_FLAGS + CUDA_ARCH_FLAGS + ctx.attr.copts)
        args.add("-ccbin", host_compiler)
        args.add_all(include_dirs, before_each = "-I", uniquify = True)
        args.add_all(system_dirs, before_each = "-isystem", uniquify = True)
        args.add_all(deps_compilation.defines.to_list(), before_each = "-D")
        # Temporaries beside the output: parallel sandboxed actions collide in /tmp.
        args.add("-objtemp")
        args.add_all(["-x", "cu", "-c", src.path, "-o", obj.path])
        ctx.actions.run(
            executable = NVCC,
            arguments = [args],
            inputs = inputs,
            outputs = [obj],
            # Actions run with an empty environment; nvcc's host gcc needs `as` on PATH.
            env = {"PATH": "/usr/bin:/bin"},
            mnemonic = "NvccCompile",
            progress_message = "nvcc {}".format(src.short_path),
        )
        objects.append(obj)

    compilation_outputs = cc_common.create_compilation_outputs(
        objects = depset(objects),
        pic_objects = depset(objects),
    )
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        compilation_outputs = compilation_outputs,
        linking_contexts = [deps_cc.linking_context],
        name = ctx.label.name,
        disallow_dynamic_library = True,
    )
    own = CcInfo(
        compilation_context = own_compilation,
        linking_context = linking_context,
    )
    return [
        DefaultInfo(files = depset(objects)),
        cc_common.merge_cc_infos(direct_cc_infos = [own], cc_infos = dep_infos),
    ]

cuda_library = rule(
    implementation = _cuda_library_impl,
    doc = "Compiles .cu sources with nvcc into a library that C++ targets depend on.",
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu", ".cuh", ".h"]),
        "hdrs": attr.label_list(allow_files = [".cuh", ".h"]),
        "textual_hdrs": attr.label_list(
            allow_files = [".cuh", ".h"],
            doc = "Files the sources include but nothing compiles on its own (a header " +
                  "that copts include ahead of each source).",
        ),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(doc = "Extra nvcc flags for this library only."),
        "_cc_toolchain": attr.label(
            default = "@bazel_tools//tools/cpp:current_cc_toolchain",
        ),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
)
