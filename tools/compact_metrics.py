"""Shrink a run's metrics.jsonl for keeping in git: only the keys that the figures (plots.PANELS), the
result tables (docs/results.md) and the timings need, floats rounded to 4 significant digits.

    python tools/compact_metrics.py results/runs/*/metrics.jsonl     # in place; RUN_DIRs work too
    python tools/compact_metrics.py --evals RUN_DIR ...              # runs no figure draws: fewer rows

Kept: iteration; every eval/*, pre_warmup/* and warmup/* key; the metrics drawn by plots.py; the
timings of the run summary's line (perf/iteration_s, rollout_s, generate_s, decode_steps, logprob_s,
update_s) and warmup_s; and rollout/zero_signal. Written as compact
JSON (no spaces), one line per iteration. With --evals only the rows a table quotes stay: iteration 0,
the first training iteration and every iteration with an evaluation. Running it twice changes nothing.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import plots  # noqa: E402

PREFIXES = ("eval/", "pre_warmup/", "warmup/")
EXTRA = {"iteration", "perf/iteration_s", "perf/rollout_s", "perf/generate_s", "perf/decode_steps", "perf/logprob_s",
         "perf/update_s", "perf/warmup_s", "rollout/zero_signal", "rollout/placeholder_thoughts"}
KEEP = EXTRA | {name for _, names in plots.PANELS for name in names}


def rounded(value):
    """4 significant digits for floats (ints, bools and non-finite values as they are)."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.4g}")
    return value


def compact_row(row):
    return {key: rounded(value) for key, value in row.items() if key in KEEP or key.startswith(PREFIXES)}


def compact_file(path, evals_only=False):
    """Rewrite PATH in place; returns (bytes before, bytes after)."""
    with open(path) as f:
        lines = [line for line in f if line.strip()]
    before = sum(len(line.encode()) for line in lines)
    rows = [json.loads(line) for line in lines]
    if evals_only:
        first_training = next((row["iteration"] for row in rows if row["iteration"] > 0), None)
        rows = [row for row in rows if row["iteration"] in (0, first_training) or "eval/success" in row]
    text = "".join(json.dumps(compact_row(row), separators=(",", ":")) + "\n" for row in rows)
    with open(path, "w") as f:
        f.write(text)
    return before, len(text.encode())


if __name__ == "__main__":
    evals_only = "--evals" in sys.argv
    paths = [arg for arg in sys.argv[1:] if arg != "--evals"]
    if not paths:
        raise SystemExit("usage: python tools/compact_metrics.py [--evals] METRICS.jsonl|RUN_DIR ...")
    total_before = total_after = 0
    for arg in paths:
        path = os.path.join(arg, "metrics.jsonl") if os.path.isdir(arg) else arg
        before, after = compact_file(path, evals_only)
        total_before, total_after = total_before + before, total_after + after
        print(f"{path}: {before:,} -> {after:,} bytes")
    print(f"total: {total_before:,} -> {total_after:,} bytes")
