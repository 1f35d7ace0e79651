#!/bin/bash
# Every check of the cuda target that needs a GPU, in one command, each step
# under its own time limit so that one hang costs only its step:
#
#   benchmarks/cuda_gpu_checks.sh [STEP ...]
#
# Steps (all by default, in this order):
#   attention  the fused attention kernel against split-back and PyTorch's SDPA
#   models     exported models against PyTorch (fused attention in bert_encoder
#              and gpt2_block at fp16), both variant paths
#   detector   SSDlite320: data-dependent shapes, post-processing on the host
#   dp         data-parallel steps run through NCCL on one rank against the
#              reference's step
#   decode     GPT-2 small's greedy generation, caches donated, against PyTorch
#   decode-graphs  the same with KILN_CUDA_GRAPH=1: each step's kernels
#              replayed as a CUDA graph
#   gemm       the GEMM sweep against cuBLAS
#   resnet     ResNet-50 at fp32 and fp16 against PyTorch eager and
#              torch.compile (COMPILE_MODE, default max-autotune, whose
#              autotuning alone took over 200 s on an H200: give it
#              LIMIT_resnet=900, or COMPILE_MODE=default for a quick run)
#
# Environment: KILN (the kiln binary; default build/tools/kiln/kiln), MODELS
# (scripts/export_models.py's exports; default build/models), TRAINING
# (scripts/export_training_models.py's; default build/training_models), WORK
# (scratch; default /tmp/kiln_gpu_checks), PY (python3 with PyTorch and CUDA),
# LIMIT (seconds per step; default 300; LIMIT_<step> for one step);
# ATTENTION_LENGTHS, NAMES (the models step), DP_NAMES, DECODE_PRECISIONS,
# SIZES (the GEMM sweep) and COMPILE_MODE narrow or change a step. Prints each step's output and a last line per step:
# passed, FAILED or TIMED OUT.
set -u
cd "$(dirname "$0")/.."
KILN=${KILN:-build/tools/kiln/kiln}
MODELS=${MODELS:-build/models}
TRAINING=${TRAINING:-build/training_models}
WORK=${WORK:-/tmp/kiln_gpu_checks}
PY=${PY:-python3}
LIMIT=${LIMIT:-300}
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(attention models detector dp decode decode-graphs gemm resnet)
nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"

# GPT-2 small's export (CPU only) runs beside the GPU steps before it.
export_pid=
if [[ " ${steps[*]} " == *" decode"* ]] && [ ! -e "$WORK/decode/gpt2_small_decoder/tokens.npy" ]; then
  mkdir -p "$WORK/decode"
  "$PY" scripts/export_decoders.py "$WORK/decode" gpt2_small_decoder >"$WORK/decode_export.log" 2>&1 &
  export_pid=$!
fi

results=()
step() {
  local name=$1; shift
  local start=$SECONDS
  local limit_var="LIMIT_$name"
  local limit=${!limit_var:-$LIMIT}
  echo "=== $name: $*"
  timeout "$limit" "$@"
  local rc=$?
  local verdict=passed
  [ $rc -eq 124 ] && verdict="TIMED OUT after ${limit} s" || { [ $rc -ne 0 ] && verdict="FAILED (exit $rc)"; }
  results+=("$name: $verdict in $((SECONDS - start)) s")
  echo "=== $name: $verdict in $((SECONDS - start)) s"
}

for s in "${steps[@]}"; do
  case $s in
    attention) step attention "$PY" benchmarks/cuda_bench.py --kiln "$KILN" --work "$WORK/bench" --skip-gemm \
                 --skip-models --attention-lengths "${ATTENTION_LENGTHS:-128,1024,4096}" ;;
    models) step models "$PY" benchmarks/cuda_bench.py --kiln "$KILN" --work "$WORK/bench" --models "$MODELS" \
              --skip-gemm --skip-attention --skip-torch-compile --names "${NAMES:-bert_encoder,gpt2_block}" --iters 20 ;;
    detector) step detector "$PY" benchmarks/cuda_detector.py "$KILN" "$MODELS" --work="$WORK/detector" ;;
    dp) step dp "$PY" benchmarks/cuda_data_parallel.py "$KILN" "$TRAINING" --run=1 \
          ${DP_NAMES:-mlp_classifier cnn_classifier gpt2_regression} ;;
    decode) [ -n "$export_pid" ] && { wait "$export_pid" || cat "$WORK/decode_export.log"; export_pid=; }
            step decode "$PY" benchmarks/cuda_decode_bench.py --kiln "$KILN" --work "$WORK/decode" \
              --precisions "${DECODE_PRECISIONS:-fp32,fp32-3xtf32,fp16}" ;;
    decode-graphs) [ -n "$export_pid" ] && { wait "$export_pid" || cat "$WORK/decode_export.log"; export_pid=; }
            step decode-graphs env KILN_CUDA_GRAPH=1 "$PY" benchmarks/cuda_decode_bench.py --kiln "$KILN" \
              --work "$WORK/decode" --precisions "${DECODE_PRECISIONS:-fp32,fp16}" ;;
    resnet) step resnet "$PY" benchmarks/cuda_bench.py --kiln "$KILN" --work "$WORK/bench" --models "$MODELS" \
              --skip-gemm --skip-attention --names resnet50 --iters 50 --compile-mode "${COMPILE_MODE:-max-autotune}" ;;
    gemm) step gemm "$PY" benchmarks/cuda_bench.py --kiln "$KILN" --work "$WORK/bench" --skip-models \
            --skip-attention --sizes "${SIZES:-1024,2048,4096,8192}" ;;
    *) echo "cuda_gpu_checks: unknown step '$s'" >&2; exit 2 ;;
  esac
done
printf '%s\n' "${results[@]}"
