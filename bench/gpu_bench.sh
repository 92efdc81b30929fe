#!/usr/bin/env bash
# Speed benchmark of the paper's setup on one GPU (issue 5): Sokoban, 8 x 16 trajectories, 5 turns,
# PPO with critic, filter 0.25, a random-weight Qwen2.5-0.5B-shaped model, 128 new tokens per turn.
# Eager generate() and the static decoder run in the same call, then the low-memory settings, then a
# profile of one static rollout. Usage: bash bench/gpu_bench.sh OUT_DIR [ITERATIONS]
set -u
out=${1:-bench/results}; k=${2:-4}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$out/gpu.txt"
run() {  # name, timeout, overrides...
  local name=$1 limit=$2; shift 2
  echo "== $name: $*"
  timeout "$limit" python3 ragen_mini.py --config config.yaml --bench "$k" run_dir=/tmp/bench-$name "$@" \
    > "$out/$name.jsonl" 2> "$out/$name.log"
  echo "exit $?"; cut -c1-330 "$out/$name.jsonl"; grep -i error "$out/$name.log" | tail -3
}
run eager 150 rollout.cache=dynamic
run static 150 rollout.cache=static
run lowmem_static 110 rollout.cache=static rollout.max_context=2048 algo.micro_batch_size=2 model.gradient_checkpointing=true
run lowmem_dynamic 150 rollout.cache=dynamic algo.micro_batch_size=2 model.gradient_checkpointing=true
timeout 100 python3 bench/profile_rollout.py rollout.cache=static > "$out/profile_static.txt" 2>&1
grep -E "warm-up|profiled" "$out/profile_static.txt"; tail -30 "$out/profile_static.txt" | cut -c1-80,150-240 | head -14
