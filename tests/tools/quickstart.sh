#!/usr/bin/env bash
# README.md's quick start, pasted as it stands into a shell in a fresh clone
# of the repository (its committed files, as a newcomer gets them), with the
# build's kiln standing in for the clone's own build. Every command must
# succeed, in order.
# Usage: quickstart.sh SOURCE_DIR KILN WORK_DIR
set -euo pipefail
src=$1 kiln=$2 work=$3
rm -rf "$work"
if git -C "$src" rev-parse --git-dir > /dev/null 2>&1; then
  git clone --quiet "$src" "$work/clone"
else  # a source tree without its history: its files, builds and outputs left out
  mkdir -p "$work/clone"
  tar -C "$src" --exclude='./build*' --exclude=./out -cf - . | tar -C "$work/clone" -xf -
  git -C "$work/clone" init --quiet && git -C "$work/clone" add -A > /dev/null
fi
# The README as it is in the working tree (the change under test), and the
# kiln built from it.
cp "$src/README.md" "$work/clone/README.md"
mkdir -p "$work/clone/build/tools/kiln"
ln -s "$kiln" "$work/clone/build/tools/kiln/kiln"
sed -n '/^<!-- quickstart -->$/,/^<!-- \/quickstart -->$/p' "$work/clone/README.md" | sed '1,2d;$d' | sed '$d' \
  > "$work/quickstart.sh"
test -s "$work/quickstart.sh"
cd "$work/clone"
bash -euxo pipefail "$work/quickstart.sh"
test -s out/qs/tiny.pftrace && test -f out/qs/y/y.npy
# Nothing lands outside out/.
test -z "$(git status --porcelain --ignored=matching | grep -v -e '^!! out/$' -e '^!! build/$' -e '^ M README.md$')"
