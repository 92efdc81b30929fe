#!/usr/bin/env bash
# Tiny-model learning runs on one GPU (issue 6), all runs of a spec file at once: the tiny model uses a
# sliver of the GPU, so several runs share it. A spec line is "name override override ...", laid over
# configs/tiny.yaml and the GPU settings below. Each run is killed after MINUTES + 3 (warm-up, final
# evaluation); its metrics.jsonl and samples.md are written straight into OUT_DIR/name/.
# Usage: bash bench/gpu_learn.sh OUT_DIR MINUTES SPEC_FILE
set -u; SECONDS=0
out=$1; minutes=$2; specs=$3
gpu="rollout.cache=static train.iterations=100000 train.time_limit_min=$minutes eval.every=20 checkpoint.every=0"
names=()
while read -r name overrides; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  names+=("$name"); mkdir -p "$out/$name"
  OMP_NUM_THREADS=4 PYTHONUNBUFFERED=1 timeout $(( (${minutes%.*} + 3) * 60 )) \
    python3 ragen_mini.py --config configs/tiny.yaml $gpu $overrides run_dir="$out/$name" > "/tmp/$name.log" 2>&1 &
done < "$specs"
wait; echo "all runs done after $SECONDS s"
for name in "${names[@]}"; do
  echo "== $name"; tr '\r' '\n' < "/tmp/$name.log" | grep -a "warm-up:\|Error\|error" | tail -3
  tr '\r' '\n' < "/tmp/$name.log" | tail -1
  grep -o '"iteration": [0-9]*\|"eval/success": [0-9.]*' "$out/$name/metrics.jsonl" | paste - - | grep eval \
    | awk '{printf "%s:%.3f ", $2, $4} END {print ""}'
  rm -rf "$out/$name/checkpoint" "$out/$name/config.yaml" "$out/$name/plots.png"
done
