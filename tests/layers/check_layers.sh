#!/usr/bin/env bash
# The layering rules of ARCHITECTURE.md that a grep can hold:
#  - the target API's headers and sources include only target/api, graph/ir,
#    graph/support, Abseil and the standard library (a plugin builds against
#    them alone);
#  - runtime/ includes no target's folder and sim/ includes no graph IR;
#  - nothing under tools/, runtime/ or target/backend/ names a built-in
#    target as a string (the default target is the one the registry calls
#    golden), nor a Python function as its default (docstrings may show
#    one in an example).
# Usage: check_layers.sh SOURCE_DIR
set -uo pipefail
cd "$1" || exit 1
status=0
bad=$(grep -HnE '#include "' target/api/*.h target/api/*.cc |
      grep -vE '#include "(target/api|graph/ir|graph/support|absl)/' || true)
if [ -n "$bad" ]; then echo "target/api includes outside the API:"; echo "$bad"; status=1; fi
bad=$(grep -HnE '#include "target/(npusim|cuda|reference|backend|placement)/' runtime/*.h runtime/*.cc || true)
if [ -n "$bad" ]; then echo "runtime/ includes a target:"; echo "$bad"; status=1; fi
bad=$(grep -rHnE '#include "(graph|target|runtime|frontend)/' sim --include=*.h --include=*.cc |
      grep -v '#include "graph/support/' || true)
if [ -n "$bad" ]; then echo "sim/ includes the graph or above:"; echo "$bad"; status=1; fi
bad=$(grep -rHnE '"(npusim|cuda|reference)"' tools runtime target/backend --include=*.h --include=*.cc || true)
bad+=$(grep -rHnE '^\s*def .*target="(npusim|cuda|reference)"' tools --include=*.py || true)
if [ -n "$bad" ]; then echo "a built-in target named outside its folder:"; echo "$bad"; status=1; fi
[ $status -eq 0 ] && echo "layers: ok"
exit $status
