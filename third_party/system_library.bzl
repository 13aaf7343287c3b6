"""system_library: a prebuilt library with a static form for executables and a PIC form for
shared libraries, as Bazel chooses between a library's static and PIC static archives.

Debian's Abseil archives are not position-independent, so they cannot go into a shared library;
Debian's shared Abseil libraries can. The repository rule in //:repositories.bzl writes two
linker scripts, one that groups the static archives and one that names the shared libraries
(AS_NEEDED), and this rule offers them as one library: Bazel links the first into executables
and tests and the second into `cc_binary(linkshared = True)` targets and other shared objects.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _system_library_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    library = cc_common.create_library_to_link(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        static_library = ctx.file.static_library,
        pic_static_library = ctx.file.pic_library,
    )
    linker_input = cc_common.create_linker_input(
        owner = ctx.label,
        libraries = depset([library]),
        user_link_flags = depset(ctx.attr.linkopts),
    )
    return [CcInfo(linking_context = cc_common.create_linking_context(
        linker_inputs = depset([linker_input]),
    ))]

system_library = rule(
    implementation = _system_library_impl,
    doc = "A prebuilt library: `static_library` for executables, `pic_library` for shared ones.",
    attrs = {
        "static_library": attr.label(allow_single_file = [".a"], mandatory = True),
        "pic_library": attr.label(allow_single_file = [".a"], mandatory = True),
        "linkopts": attr.string_list(),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
)
