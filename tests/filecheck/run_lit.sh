#!/usr/bin/env bash
# Runs the `// RUN:` lines of one test file, lit-style: %s is the file,
# %kiln the kiln driver, %t a scratch path of this file's own (removed at the
# end), FileCheck the LLVM FileCheck, not a command that must fail. Every RUN line must succeed. Usage: run_lit.sh FILE KILN FILECHECK
set -uo pipefail
file=$1
kiln=$2
filecheck=$3
mapfile -t runs < <(sed -n 's|^[[:space:]]*//[[:space:]]*RUN:[[:space:]]*||p' "$file")
if [ ${#runs[@]} -eq 0 ]; then
  echo "run_lit: $file has no RUN line" >&2
  exit 1
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for cmd in "${runs[@]}"; do
  cmd=${cmd//%s/$file}
  cmd=${cmd//%kiln/$kiln}
  cmd=${cmd//%t/$scratch/t}
  cmd=${cmd//FileCheck/$filecheck}
  cmd=${cmd//not /$(dirname "$0")/not.sh }
  echo "RUN: $cmd"
  if ! bash -o pipefail -c "$cmd"; then
    echo "run_lit: FAILED: $cmd" >&2
    status=1
  fi
done
exit $status
