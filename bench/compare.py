"""This checkout against another one (e.g. the code before a change), back to back on one machine:
`python ragen_mini.py --bench K` in each, or K iterations of a preset, then the median of iterations 2..K of
every timing, and the ratio.

    git worktree add ../before <commit>
    python bench/compare.py ../before --bench 5 [section.key=value ...]       # same overrides for both
    python bench/compare.py ../before --bench 5 --baseline-overrides "rollout.engine=hf" [overrides]
    python bench/compare.py ../before --bench 4 --abba                          # this, before, before, this
    python bench/compare.py ../before --bench 15 --config configs/smollm2.yaml  # the preset, real training

With --config, each checkout trains the preset for K iterations (after its format warm-up) with no
evaluation, checkpoint or time limit, into a folder under --runs (default: a temporary one), and the
timings come from its metrics.jsonl. A preset samples its replies, so the two runs' replies and decoding
steps differ: perf/generate_ms_per_step, the generation time per decoding step, compares the engines'
speed apart from the reply lengths.

A checkout from before rollout.engine (its config.yaml has rollout.cache and model.compile) gets the engine
given in its old keys: rollout.engine=hf is rollout.cache=dynamic model.compile=false, fast is
rollout.cache=static model.compile=true, auto is their defaults (such a checkout rounds widths, picks flash
attention, packs GAE and freezes the cycle collector on a GPU whatever its keys say).

Prints both JSON lines per iteration as they come, then a table; writes nothing. The first benchmark on a
freshly started machine has run slower than later ones (docs/performance.md); --abba runs each checkout
once early and once late and pools their iterations 2..K.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = ["perf/iteration_s", "perf/rollout_s", "perf/generate_s", "perf/generate_ms_per_step",
        "perf/logprob_s", "perf/update_s", "perf/decode_steps", "perf/gen_tokens_per_s", "perf/peak_mem_gb",
        "perf/peak_reserved_gb"]
OLD_KEYS = {"hf": ["rollout.cache=dynamic", "model.compile=false"],
            "fast": ["rollout.cache=static", "model.compile=true"], "auto": []}


def for_checkout(folder, overrides):
    """The overrides as `folder`'s config knows them: rollout.engine=E in the old keys where its config.yaml
    has no rollout.engine."""
    with open(os.path.join(folder, "config.yaml")) as f:
        if "engine" in yaml.safe_load(f)["rollout"]:
            return list(overrides)
    translated = []
    for item in overrides:
        key, _, value = item.partition("=")
        translated += OLD_KEYS[value] if key == "rollout.engine" else [item]
    return translated


def environment(folder, command):
    """Prints the command about to run in `folder`; -> its environment. Each checkout compiles into an
    inductor cache of its own, next to it: a graph cached by one checkout could otherwise serve the other,
    since the cache's key does not cover everything a graph depends on (the attention backend, for one)."""
    print(f"$ (cd {folder} && {' '.join(command)})", flush=True)
    return {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(os.path.abspath(folder), ".inductor-cache")}


def bench(folder, k, overrides):
    """Runs the benchmark in `folder`; -> its JSON lines of iterations 2..k."""
    command = [sys.executable, "ragen_mini.py", "--bench", str(k), *for_checkout(folder, overrides)]
    lines = []
    env = environment(folder, command)
    with subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE, text=True, env=env) as process:
        for line in process.stdout:
            if line.startswith("{"):
                print(line.strip(), flush=True)
                lines.append(json.loads(line))
    if process.returncode or len(lines) < 2:
        raise SystemExit(f"the benchmark in {folder} failed (exit code {process.returncode})")
    return lines[1:]  # iteration 1 compiles and warms up


def train(folder, k, config, overrides, run_dir):
    """Trains `config` for k iterations in `folder`, into run_dir; -> the metrics.jsonl lines of iterations
    2..k."""
    command = [sys.executable, "ragen_mini.py", "--config", config, *for_checkout(folder, overrides),
               f"train.iterations={k}", "train.time_limit_min=0", "eval.every=0", "checkpoint.every=0",
               f"run_dir={run_dir}", "overwrite=true"]
    if subprocess.run(command, cwd=folder, env=environment(folder, command)).returncode:
        raise SystemExit(f"the run in {folder} failed; its folder: {run_dir}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    return [line for line in lines if line["iteration"] >= 2]


def medians(lines):
    """The median of each timing in KEYS over `lines`, perf/generate_ms_per_step derived from each line's
    generation time and decoding steps."""
    lines = [{**line, "perf/generate_ms_per_step": 1000 * line["perf/generate_s"] / line["perf/decode_steps"]}
             if line.get("perf/decode_steps") else line for line in lines]
    return {key: statistics.median(line[key] for line in lines) for key in KEYS if key in lines[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("baseline", help="the other checkout's folder")
    parser.add_argument("--bench", type=int, default=5,
                        help="iterations per checkout (the first is not counted)")
    parser.add_argument("--baseline-overrides", default=None,
                        help="the baseline's overrides, if others, in one string")
    parser.add_argument("--abba", action="store_true",
                        help="four benchmarks: this, the baseline, the baseline, this")
    parser.add_argument("--config", help="train this preset for --bench iterations instead of --bench")
    parser.add_argument("--runs",
                        help="with --config: where the run folders go (default: a temporary folder)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_intermixed_args()
    baseline_overrides = (args.overrides if args.baseline_overrides is None
                          else args.baseline_overrides.split())
    # folder, overrides, lines
    checkouts = [(HERE, args.overrides, []), (args.baseline, baseline_overrides, [])]
    runs = (args.runs or tempfile.mkdtemp(prefix="compare-")) if args.config else None
    if runs:
        os.makedirs(runs, exist_ok=True)
    order = [checkouts[i] for i in ([0, 1, 1, 0] if args.abba else [0, 1])]
    for n, (folder, overrides, lines) in enumerate(order, 1):
        run_dir = runs and os.path.join(runs, f"{n}-{os.path.basename(os.path.abspath(folder))}")
        lines += (train(folder, args.bench, args.config, overrides, run_dir) if args.config else
                  bench(folder, args.bench, overrides))
    ours, theirs = (medians(lines) for _, _, lines in checkouts)
    pooled = " of both runs" if args.abba else ""
    print(f"\nmedian of iterations 2-{args.bench}{pooled}: this checkout, {args.baseline}, "
          "and how many times faster this is")
    for key in KEYS:
        if key in ours and key in theirs:
            faster = (ours[key] / theirs[key] if key.endswith("_per_s") else
                      theirs[key] / ours[key] if key.endswith(("_s", "_per_step")) else None)
            print(f"{key:24s} {ours[key]:12.2f} {theirs[key]:12.2f}"
                  + ("" if faster is None else f" {faster:8.2f}x"))


if __name__ == "__main__":
    main()
