#!/usr/bin/env python3
"""Lists the includes that point up the layers (docs/architecture.md, "who depends on whom").

Inside the core, a folder of core/src may include only its own folder and those before it in
CORE_ORDER; a public header under core/include/triax/core/ counts as its folder's. The libraries
below the core (data, report, faults, lr, device) include nothing of it but the config. A library
over the core's mesh (parallel) includes of the core only the folders up to its place in CORE_ORDER,
and only the core's folders after that place include it. The core reads no folder format but its own
checkpoints: it includes none of interop's Hugging Face headers (convert/ implements the core's
ExternalModelFormat with them). The libraries above the core (comm, convert, checkpoint_async) use
it; the core includes none of them. Exit status 1 when anything points up, with one line per
include: file, line, the include, and why.
"""
import argparse
import pathlib
import re
import sys

CORE_ORDER = ["comm", "plugins", "gradients", "checkpoint", "step", "train"]
# The core's public headers that stand outside a folder, and the folder they belong to.
CORE_TOP_HEADERS = {"trainer.hpp": "train"}
BELOW_CORE = ["config", "data", "report", "faults", "lr", "device"]
# Libraries above the core: they use it, it knows none of them.
ABOVE_CORE = ["comm", "convert", "checkpoint_async"]
# Libraries between the core's folders: each sits right after the named folder of CORE_ORDER.
OVER_CORE_FOLDER = {"parallel": "comm"}
# Headers of a format the core reaches only through a library above it.
FOREIGN_FORMAT = re.compile(r"triax/interop/hf_")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def core_folder_of_include(include):
    """The core folder an include names, or None for anything outside the core."""
    public = re.match(r"triax/core/(\w+)/", include)
    if public:
        return public.group(1)
    top = re.match(r"triax/core/(\w+\.hpp)$", include)
    if top:
        return CORE_TOP_HEADERS.get(top.group(1))
    private = re.match(r"(\w+)/\w+\.hpp$", include)
    if private and private.group(1) in CORE_ORDER:
        return private.group(1)
    return None


def core_folder_of_file(root, path):
    parts = path.relative_to(root / "core").parts
    if parts[0] == "src":
        return parts[1]
    inner = parts[3:]  # include/triax/core/...
    return inner[0] if len(inner) > 1 else CORE_TOP_HEADERS.get(inner[0])


def includes(path):
    text = path.read_text(errors="replace")
    for match in INCLUDE.finditer(text):
        yield text.count("\n", 0, match.start()) + 1, match.group(1)


def sources(folder):
    return sorted(p for p in folder.rglob("*") if p.suffix in (".cpp", ".hpp"))


def upward_includes(root):
    found = []
    for path in sources(root / "core"):
        mine = core_folder_of_file(root, path)
        for line, include in includes(path):
            theirs = core_folder_of_include(include)
            if mine in CORE_ORDER and theirs in CORE_ORDER and CORE_ORDER.index(theirs) > CORE_ORDER.index(mine):
                found.append((path, line, include, f"core/{mine} may not include core/{theirs}"))
            elif FOREIGN_FORMAT.match(include):
                found.append((path, line, include, "the core reads Hugging Face folders only through convert/"))
            elif include.split("/")[:2] in [["triax", above] for above in ABOVE_CORE]:
                above = include.split("/")[1]
                found.append((path, line, include, f"the core may not include {above}/, which sits above it"))
            elif mine in CORE_ORDER and library_between(include):
                library = library_between(include)
                if CORE_ORDER.index(mine) <= CORE_ORDER.index(OVER_CORE_FOLDER[library]):
                    found.append((path, line, include, f"core/{mine} may not include {library}/, which sits above it"))
    for library in BELOW_CORE:
        for path in sources(root / library):
            for line, include in includes(path):
                if include.startswith("triax/core/") or library_between(include):
                    found.append((path, line, include, f"{library}/ sits below the core"))
    found.extend(between_upward_includes(root))
    return found


def library_between(include):
    """The library between the core's folders that an include names, or None."""
    match = re.match(r"triax/(\w+)/", include)
    return match.group(1) if match and match.group(1) in OVER_CORE_FOLDER else None


def between_upward_includes(root):
    """Includes from a library between the core's folders into the core's folders above it."""
    found = []
    for library, below in OVER_CORE_FOLDER.items():
        for path in sources(root / library):
            for line, include in includes(path):
                theirs = core_folder_of_include(include)
                if include.startswith("triax/core/") and (
                        theirs not in CORE_ORDER or CORE_ORDER.index(theirs) > CORE_ORDER.index(below)):
                    found.append((path, line, include, f"{library}/ may include only core/{below} and the folders before it"))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=".", help="the source tree (default: .)")
    root = pathlib.Path(parser.parse_args().root)
    found = upward_includes(root)
    for path, line, include, why in found:
        print(f"{path.relative_to(root)}:{line}: #include \"{include}\": {why}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
