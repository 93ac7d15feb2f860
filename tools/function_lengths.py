#!/usr/bin/env python3
"""Lists the C++ functions longer than a limit, so that long functions are caught in review.

    tools/function_lengths.py --max 60 apps generate core [--exclude core/src/comm ...]

A function's length is its lines from the line of its name to its closing brace. The scan matches
braces after removing comments, string and character literals and preprocessor lines; a brace
whose head (the text since the last ';', '{' or '}') holds a parameter list opens a function body,
one after class/struct/union/enum/namespace opens a scope to look inside, and any other (an
initializer) is skipped. Lambdas count towards the function that holds them. This is enough for
this code base's style, not a C++ parser.

Exit status: 0 when no function is longer than --max, 1 when some are (they are listed), 2 on
wrong arguments.
"""
import argparse
import re
import sys
from pathlib import Path

SOURCE_SUFFIXES = {".cpp", ".cc", ".cu", ".hpp", ".h", ".cuh"}
SCOPE_KEYWORD = re.compile(r"\b(class|struct|union|enum|namespace|extern)\b")
IDENTIFIER_BEFORE_PAREN = re.compile(r"(~?[A-Za-z_]\w*|operator\s*\S+?)\s*$")
# `Name(args) : member_(x), other_{` : a brace initializer in a constructor's initializer list.
INITIALIZER_LIST = re.compile(r"\)\s*(noexcept\s*)?:(?!:)")


def blank_literals_and_comments(text):
    """The text with comments, literals and preprocessor lines replaced by spaces; newlines kept,
    so that offsets and line numbers stay those of the file."""
    out = list(text)
    i, n = 0, len(text)
    at_line_start = True

    def blank(start, end):
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            end = i
            while end < n and (text[end] != "\n" or text[end - 1] == "\\"):
                end += 1
            blank(i, end)
            i = end
            continue
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delimiter = text[i + 2:open_paren]
            end = text.find(")" + delimiter + '"', open_paren)
            end = n if end < 0 else end + len(delimiter) + 2
            blank(i + 2, end - 1)
            i = end
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000
                i += 1
                continue
            end = i + 1
            while end < n and text[end] != c:
                end += 2 if text[end] == "\\" else 1
            blank(i + 1, min(end, n))
            i = end + 1
        else:
            i += 1
    return "".join(out)


def matching_brace(code, open_index):
    depth = 0
    for k in range(open_index, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


def function_name(head):
    """The declarator's name: the identifier before the parameter list's opening parenthesis."""
    depth = 0
    close = head.rfind(")")
    for k in range(close, -1, -1):
        if head[k] == ")":
            depth += 1
        elif head[k] == "(":
            depth -= 1
            if depth == 0:
                # `Name(args) : init(x)`: the parameter list is the first top-level one of the head.
                inner = function_name(head[:k]) if INITIALIZER_LIST.search(head[:k]) else None
                if inner:
                    return inner
                match = IDENTIFIER_BEFORE_PAREN.search(head[:k])
                return (match.group(1), k - len(match.group(0).lstrip())) if match else None
    return None


def functions_in(code):
    """(name, first line, last line) of every function body in `code` (blanked source)."""
    found = []
    line_of = _line_index(code)
    head_start = 0
    i = 0
    scope_ends = []
    while i < len(code):
        c = code[i]
        if c in ";":
            head_start = i + 1
        elif c == "}":
            head_start = i + 1
        elif c == "{":
            head = code[head_start:i]
            stripped = head.strip()
            end = matching_brace(code, i)
            if INITIALIZER_LIST.search(head) and re.search(r"[\w>]\s*$", stripped):
                i = end + 1  # a member's brace initializer: the head goes on
                continue
            if SCOPE_KEYWORD.search(head.split("(")[0]) or not stripped:
                head_start = i + 1  # a namespace, class or block: look inside
            elif "(" in head and not stripped.endswith("="):
                named = function_name(head)
                name, offset = named if named else ("?", len(head) - len(head.lstrip()))
                found.append((name, line_of(head_start + offset), line_of(end)))
                i = end
                head_start = end + 1
            else:
                i = end  # an initializer: `= {...}` or `T value{...}`
        i += 1
    return found


def _line_index(code):
    starts = [0] + [k + 1 for k, ch in enumerate(code) if ch == "\n"]

    def line_of(offset):
        lo, hi = 0, len(starts)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if starts[mid] <= offset:
                lo = mid
            else:
                hi = mid
        return lo + 1

    return line_of


def source_files(folders, excluded):
    for folder in folders:
        root = Path(folder)
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES)
        for path in paths:
            if not any(path == e or e in path.parents for e in excluded):
                yield path


def main():
    parser = argparse.ArgumentParser(description="List C++ functions longer than --max lines.")
    parser.add_argument("folders", nargs="+", help="folders (or files) to scan, recursively")
    parser.add_argument("--max", type=int, default=60, help="longest length allowed (default 60)")
    parser.add_argument("--exclude", action="append", default=[], help="a folder not to scan (repeatable)")
    parser.add_argument("--longest", action="store_true", help="also print the longest function found")
    args = parser.parse_args()
    for folder in args.folders:
        if not Path(folder).exists():
            parser.error(f"no such folder: {folder}")
    excluded = [Path(e) for e in args.exclude]

    too_long = []
    longest = None
    for path in source_files(args.folders, excluded):
        code = blank_literals_and_comments(path.read_text(encoding="utf-8", errors="replace"))
        for name, first, last in functions_in(code):
            length = last - first + 1
            if longest is None or length > longest[0]:
                longest = (length, path, first, name)
            if length > args.max:
                too_long.append((length, path, first, name))
    for length, path, first, name in sorted(too_long, key=lambda f: (-f[0], str(f[1]))):
        print(f"{path}:{first}: {name}: {length} lines (more than {args.max})")
    if args.longest and longest:
        length, path, first, name = longest
        print(f"longest: {path}:{first}: {name}: {length} lines")
    return 1 if too_long else 0


if __name__ == "__main__":
    sys.exit(main())
