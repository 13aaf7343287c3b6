#!/usr/bin/env python3
"""Compares the kernels' machine code of two revisions, function by function.

Compiles every mla/kernels/*.cu of each revision with the nvcc flags of that revision's
tools/cuda/defs.bzl (the flags Bazel uses), keeps the cubins nvcc embeds in the objects, and
compares for each kernel function its code section (.text.<function>: the encoded instructions,
without addresses or line information, which live in other sections), its register count and
the other attributes .nv.info gives it, its own attribute section (.nv.info.<function>), its
relocations (by symbol name) and the sizes of its shared-memory and parameter sections. No
disassembler is needed: equal code sections are equal instructions. Functions
are matched by demangled name after the --rename substitutions (regular expressions, applied to
the first revision's names in order), so that kernels renamed or moved to another namespace are
compared with their new selves.

  tools/compare_kernel_code.py a40fd8b HEAD --rename '\\bmla::=mla_tail::internal::' ...
  tools/compare_kernel_code.py main WORKTREE   # WORKTREE: the files as they are now

Prints one line per function (identical, differs: what, or only in one revision) and exits
non-zero when any function differs or is unmatched.
"""

import argparse
import ast
import collections
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

NVCC = os.path.join(os.environ.get("CUDA_PATH", "/usr/local/cuda"), "bin", "nvcc")
# The .nv.info attributes that name a function (EIATTR_*), by number.
ATTRIBUTES = {0x11: "frame size", 0x12: "min stack size", 0x23: "max stack size", 0x2F: "registers"}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def checkout(revision, into):
    """The tree of `revision` (or the working tree for WORKTREE) under `into`."""
    if revision == "WORKTREE":
        return REPO
    os.makedirs(into)
    archive = subprocess.run(["git", "-C", REPO, "archive", revision], check=True,
                             stdout=subprocess.PIPE).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def nvcc_flags(tree):
    """NVCC_FLAGS + CUDA_ARCH_FLAGS of the tree's tools/cuda/defs.bzl."""
    with open(os.path.join(tree, "tools/cuda/defs.bzl")) as f:
        text = f.read()
    flags = []
    for name in ("NVCC_FLAGS", "CUDA_ARCH_FLAGS"):
        match = re.search(r"^%s = (\[.*?\])" % name, text, re.S | re.M)
        if not match:
            sys.exit("compare_kernel_code: no %s in %s/tools/cuda/defs.bzl" % (name, tree))
        flags += ast.literal_eval(re.sub(r"#.*", "", match.group(1)))
    return flags


def compile_cubins(tree, work):
    """Compiles the tree's kernel sources; returns the cubin paths."""
    includes = os.path.join(work, "include")
    os.makedirs(includes)
    os.symlink(os.path.abspath(tree), os.path.join(includes, "mla_tail"))  # "mla_tail/mla/..."
    sources = sorted(f for f in os.listdir(os.path.join(tree, "mla/kernels")) if f.endswith(".cu"))
    cubins = []
    for source in sources:
        keep = os.path.join(work, "keep", source)
        os.makedirs(keep)
        subprocess.run([NVCC] + nvcc_flags(tree) + [
            "-I", tree, "-I", includes, "-keep", "-keep-dir", keep, "-x", "cu", "-c",
            os.path.join(tree, "mla/kernels", source), "-o", os.path.join(keep, "out.o")
        ], check=True, env=dict(os.environ, PATH="/usr/bin:/bin"))
        cubins += [os.path.join(keep, f) for f in os.listdir(keep) if f.endswith(".cubin")]
    return cubins


def elf_sections(path):
    """{name: (sh_type, sh_flags, sh_info, data)} and the symbol names of an ELF64 file."""
    with open(path, "rb") as f:
        data = f.read()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def string(table, offset):
        start = headers[table][4] + offset
        return data[start:data.index(b"\0", start)].decode()

    sections, symbols = {}, []
    for h in headers:
        name, kind, flags, _, offset, size, link, info = h[:8]
        body = data[offset:offset + size] if kind != 8 else b""  # SHT_NOBITS holds no bytes
        sections[string(shstrndx, name)] = (kind, flags, info, body, size)
        if kind == 2:  # SHT_SYMTAB
            for i in range(0, size, 24):
                (symbol_name,) = struct.unpack_from("<I", data, offset + i)
                symbols.append(string(link, symbol_name))
    return sections, symbols


def global_attributes(sections, symbols):
    """{symbol name: {attribute: value}} from the cubin's .nv.info: the attributes that name a
    function by symbol index (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE, the stack sizes)."""
    body = sections.get(".nv.info", (0, 0, 0, b"", 0))[3]
    result = collections.defaultdict(dict)
    i = 0
    while i + 2 <= len(body):
        form, attribute = body[i], body[i + 1]
        if form == 4:  # EIFMT_SVAL: u16 size, then the payload
            (size,) = struct.unpack_from("<H", body, i + 2)
            payload, i = body[i + 4:i + 4 + size], i + 4 + size
        elif form == 3:  # EIFMT_HVAL: a u16 value
            payload, i = body[i + 2:i + 4], i + 4
        else:  # EIFMT_NVAL, EIFMT_BVAL
            payload, i = b"", i + (2 if form == 1 else 3)
        if form == 4 and len(payload) == 8:
            symbol, value = struct.unpack_from("<II", payload)
            if symbol < len(symbols):
                name = ATTRIBUTES.get(attribute, "attribute 0x%02x" % attribute)
                result[symbols[symbol]][name] = value
    return result


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), check=True, text=True,
                         stdout=subprocess.PIPE).stdout
    return dict(zip(names, out.split("\n")))


def functions(cubins, renames):
    """{demangled, renamed name: {aspect: value}} over the cubins' kernel functions."""
    result = {}
    for cubin in cubins:
        source = os.path.basename(os.path.dirname(cubin))  # keep/<source>/x.cubin
        sections, symbols = elf_sections(cubin)
        mangled = [s[len(".text."):] for s in sections if s.startswith(".text.")]
        names = demangle(mangled + symbols)

        def rename(name):
            name = names.get(name, name)
            for old, new in renames:
                name = re.sub(old, new, name)
            return name

        attributes = global_attributes(sections, symbols)
        for m in mangled:
            kind, flags, info, text, _ = sections[".text." + m]
            aspects = collections.OrderedDict()
            aspects["code"] = text
            aspects["flags"] = flags
            aspects.update(attributes.get(m, {}))
            for prefix in (".rel.text.", ".rela.text."):
                rel = sections.get(prefix + m)
                if rel:
                    step = 16 if prefix == ".rel.text." else 24
                    entries = []
                    for i in range(0, len(rel[3]), step):
                        offset, r_info = struct.unpack_from("<QQ", rel[3], i)
                        addend = struct.unpack_from("<q", rel[3], i + 16)[0] if step == 24 else 0
                        entries.append((offset, r_info & 0xFFFFFFFF,
                                        rename(symbols[r_info >> 32]), addend))
                    aspects["relocations"] = entries
            for prefix in (".nv.shared.", ".nv.constant0."):
                if prefix + m in sections:
                    aspects[prefix.strip(".") + " bytes"] = sections[prefix + m][4]
            # The function's own constant banks past its parameters (.nv.constantN.<function>).
            for section, (_, _, _, body, size) in sections.items():
                bank = re.match(r"^\.nv\.constant([1-9][0-9]*)\.(.+)$", section)
                if bank and bank.group(2) == m:
                    aspects["constant bank " + bank.group(1)] = (body, size)
            info_section = sections.get(".nv.info." + m)
            if info_section:
                aspects["attributes"] = info_section[3]
            name = rename(m)
            if name in result:  # the same function compiled in two sources: each compared
                name = "%s [%s]" % (name, source)
            result[name] = aspects
        # The source's initialized device data (values a kernel reads through memory) and
        # shared constant banks: a change there changes what the kernels compute.
        data = collections.OrderedDict()
        for section, (_, _, _, body, size) in sorted(sections.items()):
            if section.startswith(".nv.global.init") or re.match(r"^\.nv\.constant[0-9]+$",
                                                                    section):
                data[section] = (body, size)
        if data:
            result["initialized data of %s" % source] = data
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="a revision")
    parser.add_argument("new", nargs="?", default="WORKTREE", help="a revision, or WORKTREE")
    parser.add_argument("--rename", action="append", default=[], metavar="REGEX=REPLACEMENT",
                        help="applied to the old revision's demangled names, in order")
    args = parser.parse_args()
    renames = [tuple(r.split("=", 1)) for r in args.rename]
    work = tempfile.mkdtemp(prefix="compare_kernel_code.")
    try:
        sides = []
        for label, revision, side_renames in (("old", args.old, renames), ("new", args.new, [])):
            tree = checkout(revision, os.path.join(work, label, "tree"))
            cubins = compile_cubins(tree, os.path.join(work, label))
            sides.append(functions(cubins, side_renames))
    finally:
        shutil.rmtree(work)
    old, new = sides
    for label, side in (("old", old), ("new", new)):
        if not side:
            print("compare_kernel_code: no kernel function compiled for the %s revision" % label)
            return 1
    differing = 0
    for name in sorted(set(old) | set(new)):
        if name not in new or name not in old:
            print("only in %s: %s" % (args.old if name not in new else args.new, name))
            differing += 1
            continue
        diffs = [a for a in old[name].keys() | new[name].keys()
                 if old[name].get(a) != new[name].get(a)]
        if diffs:
            differing += 1
        print("%s: %s" % ("differs (%s)" % ", ".join(sorted(diffs)) if diffs else "identical",
                          name))
    print("%d functions, %d identical" % (len(set(old) | set(new)),
                                          len(set(old) | set(new)) - differing))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
