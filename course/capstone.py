"""The capstone: with every exercise implemented, the copy trains the Bandit preset on a laptop CPU to an
evaluation success of at least 0.95 in under 5 minutes.

    python course/capstone.py            # run from the copy's root (the student's or the solution)

It runs `python ragen_mini.py --config configs/bandit.yaml` into a fresh run folder, then reads the final
evaluation from its metrics.jsonl. Exit code 0 when both thresholds hold, 1 otherwise. The 5 minutes are
wall-clock time on an otherwise idle 2-core machine; the CPU time of the run is printed beside it, and a
run over the time bar also prints the load average: on a busy machine, rerun when it is idle.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUCCESS, MINUTES = 0.95, 5.0


def cpu_seconds():
    """CPU seconds (user + system) of this process and of the children it has waited for (the training)."""
    times = os.times()
    return time.process_time() + times.children_user + times.children_system


if __name__ == "__main__":
    run_dir = os.path.join(tempfile.mkdtemp(prefix="capstone-"), "run")
    started, cpu_started = time.time(), cpu_seconds()
    done = subprocess.run([sys.executable, "ragen_mini.py", "--config", "configs/bandit.yaml", f"run_dir={run_dir}",
                           "train.device=cpu"], cwd=ROOT)
    minutes = (time.time() - started) / 60
    cpu_minutes = (cpu_seconds() - cpu_started) / 60
    if done.returncode != 0:
        raise SystemExit(f"capstone: FAIL, the run stopped with exit code {done.returncode}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        evals = [row["eval/success"] for row in map(json.loads, f) if "eval/success" in row]
    ok = evals[-1] >= SUCCESS and minutes < MINUTES
    print(f"capstone: {'PASS' if ok else 'FAIL'}: final evaluation success {evals[-1]:.3f} (needs {SUCCESS}), "
          f"{minutes:.1f} min wall-clock (needs under {MINUTES:g}), {cpu_minutes:.1f} min of CPU time")
    if minutes >= MINUTES:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"
        print(f"capstone: load average (1, 5, 15 min): {load}. The {MINUTES:g}-minute bar assumes an otherwise "
              "idle 2-core machine; if other work was running, rerun the capstone when the machine is idle.")
    raise SystemExit(0 if ok else 1)
