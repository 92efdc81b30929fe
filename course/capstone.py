"""The capstone: with every exercise implemented, the copy trains the Bandit preset on a laptop CPU to an
evaluation success of at least 0.95 in under 5 minutes.

    python course/capstone.py            # run from the copy's root (the student's or the solution)

It runs `python ragen_mini.py --config configs/bandit.yaml` into a fresh run folder, then reads the final
evaluation from its metrics.jsonl. Exit code 0 when both thresholds hold, 1 otherwise.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUCCESS, MINUTES = 0.95, 5.0

if __name__ == "__main__":
    run_dir = os.path.join(tempfile.mkdtemp(prefix="capstone-"), "run")
    started = time.time()
    done = subprocess.run([sys.executable, "ragen_mini.py", "--config", "configs/bandit.yaml", f"run_dir={run_dir}",
                           "train.device=cpu"], cwd=ROOT)
    minutes = (time.time() - started) / 60
    if done.returncode != 0:
        raise SystemExit(f"capstone: FAIL, the run stopped with exit code {done.returncode}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        evals = [row["eval/success"] for row in map(json.loads, f) if "eval/success" in row]
    ok = evals[-1] >= SUCCESS and minutes < MINUTES
    print(f"capstone: {'PASS' if ok else 'FAIL'}: final evaluation success {evals[-1]:.3f} (needs {SUCCESS}), "
          f"{minutes:.1f} min (needs under {MINUTES:g})")
    raise SystemExit(0 if ok else 1)
