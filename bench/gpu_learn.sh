#!/usr/bin/env bash
# Tiny-model learning runs on one GPU (issue 6), all runs of a spec file at once: the tiny model uses a
# sliver of the GPU, so several runs share it. A spec line is "name override override ...", laid over
# configs/tiny.yaml and the GPU settings below. Each run is killed after MINUTES + 3 (warm-up, final
# evaluation; keep MINUTES plus the warm-up within a device call's 10 minutes). Its final checkpoint,
# metrics.jsonl and samples.md are packed as OUT_DIR/name/run.tgz.partNN (15 MB pieces: a device call
# returns files up to 16 MiB); unpack with: cat OUT_DIR/name/run.tgz.part* | tar xzf - -C DIR
#
# Usage: bash bench/gpu_learn.sh OUT_DIR MINUTES SPEC_FILE [FROM_DIR]
# FROM_DIR: an earlier OUT_DIR (carried to the device); a run with pieces there resumes from its
# checkpoint for MINUTES more (or the line's own train.time_limit_min): how a run longer than one
# 10-minute device call is made. A device call returns at most 64 MiB: two runs' checkpoints.
set -u -f; SECONDS=0  # -f: no glob expansion of the overrides
out=$1; minutes=$2; specs=$3; from=${4:-}
gpu="rollout.cache=static train.iterations=100000 eval.every=20 checkpoint.every=100000"
work=$(mktemp -d); names=()
while read -r name overrides || [[ -n "$name" ]]; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  names+=("$name"); mkdir -p "$out/$name"
  if [[ -n "$from" && -e "$from/$name/run.tgz.part00" ]]; then  # resumed from the checkpoint: its saved
    set +f; cat "$from/$name"/run.tgz.part* | tar xzf - -C "$work"; set -f  # config, then the line's overrides
    run=(--resume "$work/$name" train.time_limit_min=$minutes $overrides)
  else
    run=(--config configs/tiny.yaml $gpu train.time_limit_min=$minutes $overrides run_dir="$work/$name")
  fi
  OMP_NUM_THREADS=4 PYTHONUNBUFFERED=1 timeout "$(awk "BEGIN {print int(($minutes + 3) * 60)}")" \
    python3 ragen_mini.py "${run[@]}" > "/tmp/$name.log" 2>&1 &
done < "$specs"
wait; echo "all runs done after $SECONDS s"
for name in "${names[@]}"; do
  echo "== $name"; tr '\r' '\n' < "/tmp/$name.log" | grep -a "warm-up:\|Error\|error" | tail -3
  tr '\r' '\n' < "/tmp/$name.log" | tail -1
  python3 -c "import json, sys; print(' '.join(f\"{r['iteration']}:{r['eval/success']:.3f}\" for r in
    map(json.loads, open(sys.argv[1])) if 'eval/success' in r))" "$work/$name/metrics.jsonl"
  # A device call returns at most 8 files: a run's metrics and samples travel inside its pieces when it
  # has a checkpoint (none if it was killed before its end), so one call can return 4 runs.
  if [[ -e "$work/$name/checkpoint/state.pt" ]]; then
    tar czf - -C "$work" "$name/checkpoint" "$name/config.yaml" "$name/metrics.jsonl" "$name/samples.md" | split -d -b 15M - "$out/$name/run.tgz.part"
  else
    cp "$work/$name/metrics.jsonl" "$work/$name/samples.md" "$out/$name/"
  fi
done
