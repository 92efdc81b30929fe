"""The capstone, part (a): with every exercise implemented, the copy trains the Bandit preset on a CPU to an
evaluation success of at least 0.95, once with PPO (ex3, ex4, ex6, ex7, ex8 and the parser, ex2) and once with
GRPO (ex5 instead of GAE and the critic).

    python course/capstone.py            # run from the copy's root (the student's or the solution)
    python course/capstone.py --only grpo

Each run is `python ragen_mini.py --config configs/bandit.yaml` (plus algo.estimator=grpo for GRPO) into a fresh
run folder; its last evaluation, after the preset's fixed 100 iterations, must reach 0.95. The bar is the iteration
count, not the clock, so a busy machine cannot fail correct code: the run's own CPU time is printed beside it, and
a run over CPU_MINUTES of CPU time (about five times what a correct run takes) fails, since that means something
in the loop is far slower than it should be. Exit code 0 when every run passes. Part (b), the investigation, is
course/capstone-investigation.md.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUCCESS, CPU_MINUTES = 0.95, 30.0
RUNS = {"ppo": [], "grpo": ["algo.estimator=grpo"]}  # overrides of configs/bandit.yaml


def children_cpu_seconds():
    """CPU seconds (user + system) of the child processes waited for so far (the training runs)."""
    times = os.times()
    return times.children_user + times.children_system


def run(name, overrides):
    """Train one run; -> (passed, one line saying why)."""
    run_dir = os.path.join(tempfile.mkdtemp(prefix=f"capstone-{name}-"), "run")
    cpu_started = children_cpu_seconds()
    done = subprocess.run([sys.executable, "ragen_mini.py", "--config", "configs/bandit.yaml", f"run_dir={run_dir}",
                           "train.device=cpu", *overrides], cwd=ROOT)
    cpu_minutes = (children_cpu_seconds() - cpu_started) / 60
    if done.returncode != 0:
        return False, f"{name}: FAIL, the run stopped with exit code {done.returncode} (its log is above)"
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        evals = [(row.get("iteration"), row["eval/success"]) for row in map(json.loads, f) if "eval/success" in row]
    if not evals:
        return False, f"{name}: FAIL, the run wrote no evaluation to {run_dir}/metrics.jsonl"
    iteration, success = evals[-1]
    ok = success >= SUCCESS and cpu_minutes < CPU_MINUTES
    return ok, (f"{name}: {'PASS' if ok else 'FAIL'}: evaluation success {success:.3f} after iteration {iteration} "
                f"(needs {SUCCESS}), {cpu_minutes:.1f} min of CPU time (needs under {CPU_MINUTES:g}); run in {run_dir}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=list(RUNS), help="one run only")
    args = parser.parse_args()
    results = [run(name, RUNS[name]) for name in RUNS if args.only in (None, name)]
    for _, line in results:
        print(f"capstone: {line}")
    raise SystemExit(0 if all(ok for ok, _ in results) else 1)
