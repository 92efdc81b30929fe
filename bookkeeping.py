"""The bookkeeping around a run, which a reader of the algorithm may skip: the run folder, what a resumed
run forgets, the summary a run ends with, what Ctrl-C does, and the messages for damaged files and full
disks. ragen_mini.train() and main() call these.
"""
import errno
import glob
import itertools
import json
import os
import re
import shutil
import signal
import time
import zipfile

import torch
from safetensors import safe_open
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


class RunError(Exception):
    """A problem with the run's files that the user must fix (a damaged checkpoint, a full disk): main()
    prints the message alone, without a traceback."""


def check_resumable(run_dir):
    """Refuse a run folder that cannot be resumed, naming the file, before any model loads."""
    checkpoint = os.path.join(run_dir, "checkpoint")
    state = os.path.join(checkpoint, "state.pt")
    damaged = (f"--resume {run_dir}: {{}} is damaged ({{}}); this checkpoint cannot be resumed. Start the run "
               "again, or resume from a copy of the run folder made before the damage.")
    if not os.path.isdir(run_dir):
        raise RunError(f"--resume {run_dir}: no such folder")
    if not os.path.isfile(os.path.join(run_dir, "config.yaml")):
        raise RunError(f"--resume {run_dir}: {os.path.join(run_dir, 'config.yaml')} is missing; a run folder "
                       "keeps the config it was started with, and a resumed run needs it")
    if not os.path.isfile(state):
        raise RunError(f"--resume {run_dir}: no checkpoint there (it is written every checkpoint.every "
                       "iterations, into RUN_DIR/checkpoint)")
    if not zipfile.is_zipfile(state):  # torch.save writes a zip archive; one cut short lacks its end record
        raise RunError(damaged.format(state, "not a whole checkpoint file"))
    weights = sorted(glob.glob(os.path.join(checkpoint, "actor", "*.safetensors")))
    if not weights:
        raise RunError(damaged.format(os.path.join(checkpoint, "actor"), "no model.safetensors in it"))
    for path in weights:
        try:
            with safe_open(path, "pt") as f:
                f.keys()
        except Exception as error:  # the library's own error types; any of them means the same here
            raise RunError(damaged.format(path, str(error).splitlines()[0])) from None


def check_finite_weights(model, folder):
    """Flipped bytes in a weight file can still load, as NaN or inf, and only crash the first sampling."""
    for name, parameter in model.named_parameters():
        if not torch.isfinite(parameter).all():
            raise RunError(f"{folder}/model.safetensors is damaged: weight {name} holds NaN or inf; this "
                           "checkpoint cannot be resumed. Start the run again, or resume from an earlier copy.")


def load_state(run_dir):
    path = os.path.join(run_dir, "checkpoint", "state.pt")
    try:
        return torch.load(path, weights_only=False)
    except Exception as error:  # pickle, zip and torch errors alike: the file is not what torch.save wrote
        raise RunError(f"--resume {run_dir}: {path} is damaged ({type(error).__name__}: "
                       f"{str(error).splitlines()[0] if str(error) else ''}); this checkpoint cannot be resumed") from None


def latest_checkpoint(run_dir):
    """'RUN_DIR/checkpoint (iteration N)', or None when no complete checkpoint was saved yet."""
    state = os.path.join(run_dir, "checkpoint", "state.pt")
    if not (os.path.isfile(state) and zipfile.is_zipfile(state)):
        return None
    iteration = torch.load(state, weights_only=False, mmap=True)["iteration"]  # mmap: tensors stay on disk
    return f"{os.path.dirname(state)} (iteration {iteration})"


def save_failed(run_dir, path, error):
    """The message for a checkpoint that could not be written; the previous one is still in place."""
    free_mb = shutil.disk_usage(run_dir).free / 2**20
    latest = latest_checkpoint(run_dir)
    return RunError(f"cannot save the checkpoint into {path} ({str(error).splitlines()[0]}). {free_mb:.0f} MB are "
                    "free on that disk: a full disk is the usual cause. "
                    + (f"The last complete checkpoint is {latest}: free some space, then continue with "
                       f"python ragen_mini.py --resume {run_dir}" if latest else "No complete checkpoint was saved yet."))


def describe_os_error(error):
    """A file the run could not write or read, in words: which file, why, what to do."""
    where = f"{error.filename}: " if error.filename else ""
    advice = {errno.ENOSPC: "The disk is full: free some space.",
              errno.EDQUOT: "The disk quota is used up: free some space.",
              errno.EACCES: "Choose a folder you may write (run_dir=...), or change its permissions.",
              errno.EPERM: "Choose a folder you may write (run_dir=...), or change its permissions.",
              errno.EROFS: "That disk is read-only: choose another run_dir=..."}
    message = f"error: {where}{error.strerror or error}. {advice.get(error.errno, 'Check that path, or choose another run_dir=...')}"
    folder = os.path.dirname(str(error.filename or ""))
    for run_dir in (folder, os.path.dirname(folder)):  # the run folder, or the folder above a file in it
        latest = latest_checkpoint(run_dir) if run_dir else None
        if latest:
            return f"{message} The last complete checkpoint is {latest}; continue with python ragen_mini.py --resume {run_dir}"
    return message


def drop_after_checkpoint(run_dir, iteration):
    """On resume: forget the metrics lines and samples.md evaluations written after the checkpoint, which
    the resumed run writes again. A partial last line (a crash while writing) is dropped; a missing
    metrics.jsonl is started again; both are said."""
    path = os.path.join(run_dir, "metrics.jsonl")
    rows = []
    if os.path.exists(path):
        rows, unreadable = plots.read_metrics(run_dir, with_unreadable=True)
        if unreadable:
            tqdm.write(f"{path}: dropped {unreadable} unreadable line(s), written when the run stopped")
    else:
        tqdm.write(f"{path} is missing: it starts again with the resumed iterations")
    with open(path, "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows if row["iteration"] <= iteration)
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
    latest = latest_checkpoint(run_dir)
    if latest:
        lines.append(f"checkpoint: {latest}; "
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
