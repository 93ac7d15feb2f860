"""Prints the shell commands of README.md's ```sh blocks, one per line: comments removed,
backslash-continued lines joined. Used by readme_commands_test.sh, which runs them as written.

  readme_commands.py README.md
"""
import sys

commands, in_block, pending = [], False, ""
for line in open(sys.argv[1], encoding="utf-8").read().splitlines():
    if line.startswith("```"):
        in_block = line.strip() in ("```sh", "```bash") if not in_block else False
        continue
    if not in_block:
        continue
    code = line.split(" #", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
    if code.endswith("\\"):
        pending += code[:-1].rstrip() + " "
        continue
    code = (pending + code.strip()).strip()
    pending = ""
    if code:
        commands.append(code)
print("\n".join(commands))
