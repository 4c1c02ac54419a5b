#!/usr/bin/env python3
"""Wraps a test file's body (everything after its includes) in

    namespace {
    namespace NABLA_UNITY_ID {
    ...
    }  // namespace NABLA_UNITY_ID
    }  // namespace

so the file can share a unity-build translation unit with others (tests/CMakeLists.txt,
NABLA_TEST_UNITY): CMake defines NABLA_UNITY_ID to a per-file name, so two files' helpers of the
same name no longer clash. Macros the file #defines are #undef'd at its end for the same reason.

  scripts/wrap-test-for-unity.py            wraps every unity-built test file not yet wrapped
  scripts/wrap-test-for-unity.py FILE...    wraps these
  scripts/wrap-test-for-unity.py --check    lists the unwrapped ones and fails if there are any
"""
import glob
import os
import re
import sys

UNITY_DIRS = ["core", "ops", "nn", "optim", "data"]  # tests/op_db: unity too, names kept unique by hand
NOT_IN_SUITE = {"tests/optim/resume_mlp.cpp"}  # a separate program


def unity_test_files():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    files = []
    for d in UNITY_DIRS:
        files += sorted(glob.glob(os.path.join(root, "tests", d, "*.cpp")))
    return [f for f in files if os.path.relpath(f, root) not in NOT_IN_SUITE]


def end_of_includes(lines):
    """Index of the last line of the leading #include block (conditional includes count)."""
    last, depth = -1, 0
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("#include"):
            last = i
        elif s.startswith("#if"):
            depth += 1
        elif s.startswith("#endif"):
            depth -= 1
            if depth == 0 and any(x.strip().startswith("#include") for x in lines[last + 1:i]):
                last = i
        elif s and not s.startswith(("//", "#")) and depth == 0 and last >= 0:
            break
    return last


def wrap(path):
    src = open(path).read()
    if "NABLA_UNITY_ID" in src:
        return False
    lines = src.rstrip("\n").split("\n")
    last = end_of_includes(lines)
    if last < 0:
        sys.exit(f"{path}: no #include found; wrap it by hand")
    macros = re.findall(r"^#define (\w+)", src, re.M)
    out = lines[: last + 1] + ["", "namespace {", "namespace NABLA_UNITY_ID {"]
    out += lines[last + 1:] + ["", "}  // namespace NABLA_UNITY_ID", "}  // namespace"]
    out += ["#undef " + m for m in macros]
    open(path, "w").write("\n".join(out) + "\n")
    return True


def main(args):
    if args[:1] == ["--check"]:
        missing = [f for f in unity_test_files() if "NABLA_UNITY_ID" not in open(f).read()]
        for f in missing:
            print(f"{os.path.relpath(f)}: not wrapped for the unity build; run "
                  f"scripts/wrap-test-for-unity.py {os.path.relpath(f)}")
        return 1 if missing else 0
    for f in args or unity_test_files():
        if wrap(f):
            print(f"wrapped {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
