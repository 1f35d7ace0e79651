#!/usr/bin/env bash
# Succeeds when the command fails (with a normal non-zero exit, not a crash).
"$@"
rc=$?
if [ $rc -eq 0 ]; then exit 1; fi
if [ $rc -ge 128 ]; then echo "not: the command crashed (exit $rc)" >&2; exit 1; fi
exit 0
