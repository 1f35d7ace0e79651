#!/usr/bin/env bash
# Runs `kiln conformance` and checks its closing summary line: at least
# MIN_PASSED tests pass. Usage: check_summary.sh KILN MIN_PASSED [flags...]
set -uo pipefail
kiln=$1
min=$2
shift 2
out=$("$kiln" conformance "$@")
echo "$out"
summary=$(echo "$out" | tail -n 1)
passed=$(echo "$summary" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
if [ -z "$passed" ]; then
  echo "check_summary: no summary line" >&2
  exit 1
fi
if [ "$passed" -lt "$min" ]; then
  echo "check_summary: $passed passed, fewer than the $min required" >&2
  exit 1
fi
