#!/usr/bin/env python3
"""Refuses a direct gtest_discover_tests() (one ctest entry, and one process, per test case) in the
tests' CMake files: they register GoogleTest programs with triax_discover_test_suites() (one entry
per suite, tests/gtest_suites.cmake).

    tests/lint/one_entry_per_suite.py <source root>

Exit status: 0 when no file calls it, 1 when some do (each call is listed with its file and line).
"""
import pathlib
import re
import sys

CALL = re.compile(r"^[^#]*\bgtest_discover_tests\s*\(")


def direct_calls(root):
    tests = root / "tests"
    files = sorted(tests.rglob("*.cmake")) + sorted(tests.rglob("CMakeLists.txt"))
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if CALL.search(line):
                yield f"{path.relative_to(root)}:{number}: {line.strip()}"


calls = list(direct_calls(pathlib.Path(sys.argv[1])))
for call in calls:
    print(f"{call}\n  register the program with triax_discover_test_suites() (tests/gtest_suites.cmake)")
sys.exit(1 if calls else 0)
