#!/usr/bin/env bash
# Training throughput of triax against the peer baseline on one GPU: one table.
#   tools/device/bench.sh [--variant 'NAME KEY=VALUE...']... [--set KEY=VALUE]... [SIZE...]
# The work is done by bench.py next to this script (standard-library Python); --help lists the
# options. docs/performance.md says how to run it on the GPU machine and what the columns mean.
exec python3 "$(dirname "${BASH_SOURCE[0]}")/bench.py" "$@"
