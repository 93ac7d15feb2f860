#!/usr/bin/env bash
# `triax config-reference --check`: the shipped docs/config-reference.md is the generated one, and
# a changed copy is refused, naming its first differing line and how to regenerate it.
set -uo pipefail
triax="$1" doc="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$triax" config-reference --check "$doc" || fail "$doc differs from \`triax config-reference\`"
"$triax" config-reference > "$work/generated.md" || fail "triax config-reference failed"
cmp -s "$work/generated.md" "$doc" || fail "the printed reference differs from $doc"

line=$(grep -n '^| `seed` |' "$doc" | cut -d: -f1)
[[ -n "$line" ]] || fail "no general.seed row in $doc"
sed "${line}s/\`42\`/\`7\`/" "$doc" > "$work/changed.md"
out="$("$triax" config-reference --check "$work/changed.md" 2>&1)"
rc=$?
[[ $rc == 1 ]] || fail "a changed reference exits $rc, expected 1: $out"
[[ "$out" == *"changed.md: line $line differs"*"triax config-reference >"* ]] || fail "unexpected message: $out"
echo "ok: the reference is current; a change on line $line is refused"
