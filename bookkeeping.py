"""The bookkeeping around a run, which a reader of the algorithm may skip: the run folder, what a resumed
run forgets, the summary a run ends with, and what Ctrl-C does. ragen_mini.train() calls these.
"""
import itertools
import json
import os
import re
import signal
import time

import torch
from tqdm import tqdm

import plots


class CtrlC:
    """The first Ctrl-C lets the current iteration finish, saves a checkpoint and stops the run (resuming
    then equals not stopping); a second one quits at once, as Python's own KeyboardInterrupt."""

    def __init__(self):
        self.pressed = False

    def __enter__(self):
        self.previous = signal.signal(signal.SIGINT, self.press)
        return self

    def press(self, signum, frame):
        self.pressed = True
        signal.signal(signal.SIGINT, signal.default_int_handler)
        tqdm.write("Ctrl-C: the run stops after this iteration, with a checkpoint. Ctrl-C again quits at once.")

    def __exit__(self, *exception):
        signal.signal(signal.SIGINT, self.previous)


def drop_after_checkpoint(run_dir, iteration):
    """On resume: forget the metrics lines and samples.md evaluations written after the checkpoint, which
    the resumed run writes again."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        kept_lines = [line for line in f if json.loads(line)["iteration"] <= iteration]
    with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
        f.writelines(kept_lines)
    samples = os.path.join(run_dir, "samples.md")
    if os.path.exists(samples):
        with open(samples) as f:
            sections = re.split(r"(?=\n# Evaluation )", f.read())  # "\n# Evaluation at iteration 10\n" ...
        later = [re.match(r"\n# Evaluation at iteration (\d+)\n", section) for section in sections]
        with open(samples, "w") as f:
            f.writelines(section for section, match in zip(sections, later) if not match or int(match[1]) <= iteration)


def run_summary(run_dir, seconds):
    """What a finished run did, in a few lines: evaluations, time, where its files are."""
    rows = plots.read_metrics(run_dir) if os.path.exists(os.path.join(run_dir, "metrics.jsonl")) else []
    evals = [(row["iteration"], row["eval/success"]) for row in rows if "eval/success" in row]
    lines = [f"done: {rows[-1]['iteration'] if rows else 0} iterations in {seconds / 60:.1f} min of training"]
    if evals:
        best = max(evals, key=lambda e: e[1])
        lines.append(f"eval success: {evals[0][1]:.3f} at iteration {evals[0][0]}, {evals[-1][1]:.3f} at the end "
                     f"(iteration {evals[-1][0]}), best {best[1]:.3f} (iteration {best[0]})")
    lines.append(f"run folder: {run_dir} (metrics.jsonl, samples.md, plots.png)")
    state = os.path.join(run_dir, "checkpoint", "state.pt")
    if os.path.exists(state):
        lines.append(f"checkpoint: {os.path.dirname(state)} (iteration {torch.load(state, weights_only=False)['iteration']}); "
                     f"continue with: python ragen_mini.py --resume {run_dir} (train.iterations=N to go past the end)")
    return "\n".join(lines)


def new_run_dir(env_name):
    """runs/<env>-<date>-<time>, created here: a run started in the same second as another gets the first
    free -2, -3, ... (mkdir fails on a folder that exists, so two processes never get the same one)."""
    base = os.path.join("runs", f"{env_name}-{time.strftime('%Y%m%d-%H%M%S')}")
    for k in itertools.count(1):
        path = base if k == 1 else f"{base}-{k}"
        try:
            os.makedirs(path)
            return path
        except FileExistsError:
            continue
