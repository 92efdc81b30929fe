#!/usr/bin/env bash
# Speed benchmark of the paper's setup on one GPU (issue 5): Sokoban, 8 x 16 trajectories, 5 turns,
# PPO with critic, filter 0.25, a random-weight Qwen2.5-0.5B-shaped model, 128 new tokens per turn.
# Runs the eager (dynamic cache) and the static-cache generate in the same call, then the low-memory
# setting. Usage: bash bench/gpu_bench.sh OUT_DIR [ITERATIONS]
set -u
out=${1:-bench/results}; k=${2:-4}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$out/gpu.txt"
run() {  # name, timeout, overrides...
  local name=$1 limit=$2; shift 2
  echo "== $name: $*"
  timeout "$limit" env ${TORCH_LOGS:+TORCH_LOGS=$TORCH_LOGS} python3 ragen_mini.py --config config.yaml --bench "$k" run_dir=/tmp/bench-$name "$@" \
    > "$out/$name.jsonl" 2> "$out/$name.log"
  echo "exit $?"; cat "$out/$name.jsonl"; tail -3 "$out/$name.log"
}
python3 bench/profile_rollout.py rollout.cache=static > "$out/profile_static.txt" 2>&1; tail -45 "$out/profile_static.txt" | cut -c1-200
python3 bench/profile_rollout.py rollout.cache=dynamic > "$out/profile_dynamic.txt" 2>&1; tail -32 "$out/profile_dynamic.txt" | cut -c1-200
run eager 150 rollout.cache=dynamic
TORCH_LOGS=recompiles run static 260 rollout.cache=static
run lowmem 200 rollout.cache=dynamic algo.micro_batch_size=2 model.gradient_checkpointing=true
