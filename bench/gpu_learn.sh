#!/usr/bin/env bash
# Tiny-model learning runs on one GPU (issue 6), three at once on the same GPU (each uses a sliver of
# it): StarPO-S on FrozenLake and Sokoban, and vanilla StarPO on FrozenLake with the same seed and
# budget. Usage: bash bench/gpu_learn.sh OUT_DIR [MINUTES]
set -u
out=${1:-bench/learn}; minutes=${2:-7.5}
mkdir -p "$out"
common="--config configs/tiny.yaml rollout.groups=64 rollout.group_size=8 algo.mini_batch_size=64
  algo.micro_batch_size=64 rollout.cache=static train.iterations=2000 train.time_limit_min=$minutes
  eval.every=20 checkpoint.every=0"
vanilla="algo.filter_ratio=1.0 algo.kl_coef=0.001 algo.clip_high=0.2"
python3 ragen_mini.py $common env.name=frozenlake run_dir=/tmp/frozenlake-starpo-s > "$out/frozenlake-starpo-s.log" 2>&1 &
python3 ragen_mini.py $common env.name=sokoban run_dir=/tmp/sokoban-starpo-s > "$out/sokoban-starpo-s.log" 2>&1 &
python3 ragen_mini.py $common env.name=frozenlake $vanilla algo.mini_batch_size=256 run_dir=/tmp/frozenlake-starpo > "$out/frozenlake-starpo.log" 2>&1 &
wait
for run in frozenlake-starpo-s sokoban-starpo-s frozenlake-starpo; do
  mkdir -p "$out/$run"; cp /tmp/$run/metrics.jsonl /tmp/$run/samples.md "$out/$run/"
  echo "== $run"; grep -o '"iteration": [0-9]*\|"eval/success": [0-9.]*' /tmp/$run/metrics.jsonl | paste - - | grep eval | tr '\n' ' '; echo
  tail -c 300 "$out/$run.log"; echo
done
rm -f "$out"/*.log
