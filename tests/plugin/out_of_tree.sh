#!/usr/bin/env bash
# A target built outside kiln's tree, as a chip team would build one: kiln
# is installed into a scratch prefix (cmake --install), the example plugin
# (examples/target_plugin, the "host" target) is configured as a project of
# its own with find_package(Kiln) and built, and the installed driver then
# lists it, compiles an exported PyTorch model for it and runs the artifact
# against PyTorch's outputs, and runs the ONNX conformance suite on it (at
# least MIN_PASSED must pass).
# Usage: out_of_tree.sh BUILD_DIR SOURCE_DIR WORK_DIR MODELS_DIR MIN_PASSED [FILTER]
set -euo pipefail
build=$1 src=$2 work=$3 models=$4 min=$5 filter=${6:-}
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src/examples/target_plugin" -B "$work/plugin" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  > "$work/configure.log"
cmake --build "$work/plugin" > "$work/build.log"
kiln="$work/prefix/bin/kiln"
plugin="$work/plugin/libkiln_host_target.so"
"$kiln" --version
"$kiln" targets --plugin="$plugin" | grep -F "host        example plugin" | grep -F "[$plugin]"
# An exported model, compiled for the plugin's target and run by its own
# executable, against PyTorch.
m="$models/mlp"
"$kiln" compile "$m/model.onnx" --plugin="$plugin" --target=host -o "$work/mlp.host"
"$kiln" run "$work/mlp.host" --plugin="$plugin" --input input_0="$m/input_0.npy" --output-dir="$work/out"
/usr/bin/python3 - "$work/out/output_0.npy" "$m/expected_0.npy" <<'PY'
import sys
import numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
err = float(np.max(np.abs(got - want)))
print(f"host target vs PyTorch: max abs error {err:.3g}")
sys.exit(0 if got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5) else 1)
PY
"$src/tests/conformance/check_summary.sh" "$kiln" "$min" --plugin="$plugin" --target=host \
  ${filter:+"--filter=$filter"} | tail -n 3
# The installed Python module, where the build made one: the same model
# from the installed prefix's dist-packages, against PyTorch.
if [ -d "$work/prefix/lib/python3/dist-packages/kiln" ]; then
  PYTHONPATH="$work/prefix/lib/python3/dist-packages" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 - "$m" <<'PY'
import os, sys
import numpy as np
import kiln
m = sys.argv[1]
got = kiln.compile(os.path.join(m, "model.onnx"), target="npusim")(np.load(os.path.join(m, "input_0.npy")))
want = np.load(os.path.join(m, "expected_0.npy"))
print(f"installed Python module, npusim vs PyTorch: max abs error {float(np.max(np.abs(got - want))):.3g}")
sys.exit(0 if np.allclose(got, want, rtol=1e-3, atol=1e-5) else 1)
PY
fi
