"""The bookkeeping around a run, which a reader of the algorithm may skip: the metrics of a rollout,
checkpoints, the run folder, what a resumed run forgets, the summary a run ends with, what
Ctrl-C does, the clock of an iteration's phases, and the messages for damaged files and full disks.
ragen_mini.train() and launch.py call these.
"""
import contextlib
import errno
import faulthandler
import glob
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile

import numpy as np
import torch
import yaml
from safetensors import safe_open
from tqdm import tqdm

import plots
import starpo
from config import parse_yaml


class CtrlC:
    """The first Ctrl-C, or a SIGTERM or SIGHUP (what a cluster scheduler sends at the end of a job, and a
    closed terminal). Once training has begun (`training`, set by the trainer), it lets the current
    iteration finish, saves a checkpoint and stops the run (resuming then equals not stopping); before that
    (loading, the format warm-up, the first evaluation) there is nothing to save, and it stops at once with
    Stopped. A second signal quits at once: Ctrl-C as Python's own KeyboardInterrupt, the others as they
    would without ragen-mini. `signum` is the first signal, for the exit code (128 + signum, as a shell
    reports it). A signal ignored when the run began stays ignored: `nohup` ignores SIGHUP so that a closed
    terminal does not stop the run, and a shell script's background job ignores Ctrl-C."""
    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.pressed, self.signum, self.training = False, None, False

    def __enter__(self):
        self.previous = {signum: signal.signal(signum, self.press) for signum in self.SIGNALS
                         if signal.getsignal(signum) is not signal.SIG_IGN}
        return self

    def press(self, signum, frame):
        self.pressed, self.signum = True, signum
        for other in self.previous:
            signal.signal(other, signal.default_int_handler if other == signal.SIGINT else signal.SIG_DFL)
        name = self.name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if not self.training:
            raise Stopped(f"{name} before training began: stopped at once, with nothing to save")
        tqdm.write(f"{name}: the run stops after this iteration, with a checkpoint. "
                   "Ctrl-C again quits at once.")

    def __exit__(self, *exception):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


class Stopped(Exception):
    """A signal before training began (CtrlC): a new run's folder is removed, a resumed one keeps its
    checkpoint as it was."""


class Watchdog:
    """A run that stops moving says so and ends. The run calls beat(what it starts doing) at every iteration,
    warm-up step and evaluation; when no beat has come for train.stall_min minutes, a thread of its own (the
    main thread may be stuck in a call that never returns) prints what the run was doing and every thread's
    stack (faulthandler), and ends the process with exit code 3, which findings.py reports as a failed run.
    Seen on a GPU shared by three runs: one waited forever on a pipe from torch inductor's compile workers,
    holding 31 GB of the card. The checkpoint is not saved from here (the stuck thread may hold the models
    half-updated): the last one saved is the one to resume from, and without one the run starts again."""
    EXIT_CODE = 3

    def __init__(self, minutes):
        self.limit_s, self.doing, self.since = minutes * 60, "starting", time.monotonic()
        self.ended = threading.Event()
        self.run_dir = None  # the run's folder, once launch.setup has opened it

    def advice(self):
        """What the user does next: resume from the run's checkpoint if it saved one, else start it again."""
        if self.run_dir and latest_checkpoint(self.run_dir):
            return f"Resume it from its last checkpoint: python ragen_mini.py --resume {self.run_dir}"
        return "It saved no checkpoint to resume from (checkpoint.every): start it again."

    def beat(self, doing):
        self.doing, self.since = doing, time.monotonic()

    def __enter__(self):
        if self.limit_s > 0:
            threading.Thread(target=self.watch, name="watchdog", daemon=True).start()
        return self

    def __exit__(self, *exception):
        self.ended.set()

    def watch(self):
        while not self.ended.wait(min(30.0, self.limit_s / 4)):
            idle = time.monotonic() - self.since
            if idle > self.limit_s:
                sys.stderr.write(f"\nerror: the run has not moved for {idle / 60:.1f} minutes (train.stall_min="
                                 f"{self.limit_s / 60:g}) while {self.doing}; every thread's stack follows, "
                                 f"then the run ends (exit code {self.EXIT_CODE}). {self.advice()}\n")
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                sys.stderr.flush()
                os._exit(self.EXIT_CODE)


class RunError(Exception):
    """A problem with the run's files that the user must fix (a damaged checkpoint, a full disk): main()
    prints the message alone, without a traceback."""


def check_resumable(run_dir, flag="--resume"):
    """Refuse a run folder that cannot be resumed (or, flag="--eval", evaluated), naming the file, before
    any model loads."""
    checkpoint = os.path.join(run_dir, "checkpoint")
    state = os.path.join(checkpoint, "state.pt")
    damaged = (f"{flag} {run_dir}: {{}} is damaged ({{}}); this checkpoint cannot be used. Start the run "
               "again, or resume from a copy of the run folder made before the damage.")
    if not os.path.isdir(run_dir):
        raise RunError(f"{flag} {run_dir}: no such folder")
    mended = recover_checkpoint(run_dir)
    if mended:
        tqdm.write(mended)
    if not os.path.isfile(os.path.join(run_dir, "config.yaml")):
        raise RunError(f"{flag} {run_dir}: {os.path.join(run_dir, 'config.yaml')} is missing; a run folder "
                       "keeps the config it was started with, and a resumed run needs it")
    if not os.path.isfile(state):
        raise RunError(f"{flag} {run_dir}: no checkpoint there (it is written every checkpoint.every "
                       "iterations, into RUN_DIR/checkpoint)")
    if not zipfile.is_zipfile(state):  # torch.save writes a zip archive; one cut short lacks its end record
        raise RunError(damaged.format(state, "not a whole checkpoint file"))
    load_state(run_dir, flag, mmap=True)  # what it holds, too (mmap: the tensors stay on disk)
    weights = sorted(glob.glob(os.path.join(checkpoint, "actor", "*.safetensors")))
    if not weights:
        raise RunError(damaged.format(os.path.join(checkpoint, "actor"), "no model.safetensors in it"))
    for path in weights:
        try:
            with safe_open(path, "pt") as f:
                f.keys()
        except Exception as error:  # the library's own error types; any of them means the same here
            raise RunError(damaged.format(path, str(error).splitlines()[0])) from None


RUN_FILES = ("config.yaml", "metrics.jsonl", "metrics.jsonl.damaged", "samples.jsonl", "samples.md",
             "samples.old.md", "plots.png", "eval.jsonl", "eval_samples.jsonl", "eval_samples.md",
             "eval_samples.old.md", "viewer.html", "viewer.html.tmp", "checkpoint", "checkpoint.tmp",
             "checkpoint.old")  # what a run writes into its folder


def check_no_links(run_dir):
    """Refuse a run folder in which a file the run writes is a symbolic link: writing through it would change
    the file it points to, anywhere on the disk (a planted checkpoint.tmp would take the checkpoint out of the
    folder). The run's own files are never links; remove the link, or start the run in a new folder."""
    for name in RUN_FILES:
        path = os.path.join(run_dir, name)
        if os.path.islink(path):
            raise RunError(f"{path} is a symbolic link (to {os.readlink(path)}): a run writes its own files "
                           "and never through a link. Remove the link, or choose another run_dir")


def check_not_a_run(run_dir, overwrite):
    """A new run never starts over in a folder that holds another run's files, unless overwrite=true.
    -> the names of those files, which the new run removes (remove_run_files) once it holds the folder's
    lock."""
    held = [name for name in RUN_FILES if os.path.lexists(os.path.join(run_dir, name))]
    if held and not written_by_a_run(run_dir):  # a checkout (its config.yaml is the schema), someone's folder
        raise RunError(f"run_dir={run_dir} holds {', '.join(held)}, which a run would write, but it is no "
                       f"ragen-mini run folder ({os.path.join(run_dir, 'config.yaml')} was not written by a "
                       "run): a new run never replaces such files, not even with overwrite=true. Choose an "
                       "empty or new folder for run_dir")
    if held and not overwrite:
        raise RunError(f"run_dir={run_dir} already holds a run ({', '.join(held)}): continue it with "
                       f"python ragen_mini.py --resume {run_dir}, choose another run_dir, or start over in "
                       "it with overwrite=true")
    return held


def code_version(folder=os.path.dirname(os.path.abspath(__file__))):
    """The code in FOLDER as git knows it: {"commit": the checkout's commit (40 hex digits), "clean": True when
    no tracked file differs from it}; {"commit": "", "clean": False} outside a git checkout or without git.
    A run records it in its config (code.commit, code.clean): a table of runs can then tell versions apart."""
    def git(*args):
        return subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=30)
    try:
        commit, status = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": "", "clean": False}
    if commit.returncode or status.returncode:
        return {"commit": "", "clean": False}
    return {"commit": commit.stdout.strip(), "clean": not status.stdout.strip()}


def written_by_a_run(run_dir):
    """Whether RUN_DIR/config.yaml is one that a run wrote: yaml.safe_dump of a whole config, byte for byte,
    which a file written by hand (a checkout's config.yaml, with its comments) never is."""
    path = os.path.join(run_dir, "config.yaml")
    if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > 1_000_000:
        return False
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        saved = parse_yaml(text)
    except Exception:  # unreadable, not UTF-8, not YAML, a key twice, an alias: not what a run writes
        return False
    return (isinstance(saved, dict) and {"run_dir", "env", "rollout", "algo"} <= set(saved)
            and yaml.safe_dump(saved, sort_keys=False) == text)


def remove_run_files(run_dir, names):
    for name in names:
        path = os.path.join(run_dir, name)
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)


def open_run_folder(cfg, resume_dir):
    """The run's folder, made if new (runs/<env>-<time> when run_dir is empty), refused if it holds another
    run (unless overwrite=true, whose old files go once the lock is held), and locked. -> (run_dir, made
    here: the folders this start made, innermost first, which a start that fails removes again)."""
    made = [] if resume_dir else missing_folders(cfg.run_dir or "runs")
    run_dir = resume_dir or cfg.run_dir or new_run_dir(cfg.env.name)
    if not resume_dir and not cfg.run_dir:
        made.insert(0, os.path.abspath(run_dir))
    os.makedirs(run_dir, exist_ok=True)
    check_no_links(run_dir)
    old_run = [] if resume_dir else check_not_a_run(run_dir, cfg.overwrite)
    take_lock(run_dir)  # one process per run folder
    remove_run_files(run_dir, old_run)  # overwrite=true: nothing of the old run mixes into the new one
    return run_dir, made


def missing_folders(path):
    """PATH and those of the folders above it that do not exist yet, innermost first."""
    path, missing = os.path.abspath(path), []
    while not os.path.lexists(path):
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def discard_start(run_dir, made):
    """A new run that failed before its first iteration: its files go, and the folders this start made
    (MADE, innermost first: the run folder, runs/ on a first run) if they are empty."""
    remove_run_files(run_dir, [name for name in (*RUN_FILES, "lock")
                               if os.path.lexists(os.path.join(run_dir, name))])
    for folder in made:
        with contextlib.suppress(OSError):  # not empty: another run's folder, or a file of the user's
            os.rmdir(folder)


def take_lock(run_dir):
    """RUN_DIR/lock holds the process id of the run that writes there: a second process is refused while the
    first lives; a lock left by a process that has ended (a crash, a kill) is taken over. release_lock ends
    it."""
    path = os.path.join(run_dir, "lock")
    while True:
        try:
            with open(path, "x") as f:  # "x": created here, or FileExistsError; never two owners
                f.write(str(os.getpid()))
            return
        except FileExistsError:
            try:
                with open(path) as f:
                    owner = int(f.read().strip() or 0)
            except (OSError, ValueError):
                owner = 0
            if owner and owner != os.getpid() and process_lives(owner):
                raise RunError(f"{run_dir} is in use by another run (process {owner}): wait for it to end, "
                               "or choose another run_dir") from None
            os.remove(path)  # the owner has ended: the lock is stale


def process_lives(pid):
    try:
        os.kill(pid, 0)  # signal 0 sends nothing: it asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def release_lock(run_dir):
    path = os.path.join(run_dir, "lock")
    if os.path.exists(path):
        os.remove(path)


def check_finite_weights(model, folder):
    """Flipped bytes in a weight file can still load, as NaN or inf, and only crash the first sampling."""
    for name, parameter in model.named_parameters():
        if not torch.isfinite(parameter).all():
            raise RunError(f"{folder}/model.safetensors is damaged: weight {name} holds NaN or inf; this "
                           "checkpoint cannot be resumed. Start the run again, "
                           "or resume from an earlier copy.")


def load_state(run_dir, flag="--resume", mmap=False):
    """RUN_DIR/checkpoint/state.pt, read as data only (weights_only=True): tensors, numbers, strings and the
    containers that hold them. A pickle may name any function to call while it loads; one that does is
    refused as damaged, so a run folder from someone else can never run code here. So is one whose
    iteration is not a whole number from 1 (a checkpoint is saved after an iteration): -3 would make a
    resumed run forget every metrics row and train from -2."""
    path = os.path.join(run_dir, "checkpoint", "state.pt")
    try:
        state = torch.load(path, weights_only=True, mmap=mmap)
    except Exception as error:  # pickle, zip and torch errors alike: the file is not what torch.save wrote
        raise RunError(f"{flag} {run_dir}: {path} is damaged ({type(error).__name__}: "
                       f"{str(error).splitlines()[0] if str(error) else ''}); "
                       "this checkpoint cannot be used") from None
    missing = sorted({"iteration", "critic", "optimizers", "rng"} - set(state if isinstance(state, dict) else {}))
    if missing:
        raise RunError(f"{flag} {run_dir}: {path} is damaged (it lacks {', '.join(missing)}); this checkpoint "
                       "cannot be used. Start the run again, or use a copy of the run folder made before")
    if not valid_iteration(state["iteration"]):
        raise RunError(f"{flag} {run_dir}: {path} is damaged (its iteration is {state['iteration']!r:.40}, not "
                       "a whole number from 1: a checkpoint is saved after an iteration); this checkpoint "
                       "cannot be used. Start the run again, or use a copy of the run folder made before")
    return state


def valid_iteration(iteration):
    return isinstance(iteration, int) and not isinstance(iteration, bool) and 1 <= iteration <= 10_000_000


def latest_checkpoint(run_dir):
    """'RUN_DIR/checkpoint (iteration N)', or None when no complete checkpoint was saved yet."""
    state = os.path.join(run_dir, "checkpoint", "state.pt")
    if not (os.path.isfile(state) and zipfile.is_zipfile(state)):
        return None
    try:  # data only, as load_state; mmap: the tensors stay on disk
        iteration = torch.load(state, weights_only=True, mmap=True)["iteration"]
    except Exception:  # a file that is not what torch.save wrote here is no complete checkpoint
        return None
    if not valid_iteration(iteration):  # edited: no checkpoint to resume from
        return None
    return f"{os.path.dirname(state)} (iteration {iteration})"


def save_failed(run_dir, path, error):
    """The message for a checkpoint that could not be written; the previous one is still in place."""
    free_mb = shutil.disk_usage(run_dir).free / 2**20
    latest = latest_checkpoint(run_dir)
    return RunError(f"cannot save the checkpoint into {path} ({str(error).splitlines()[0]}). "
                    f"{free_mb:.0f} MB are free on that disk: a full disk is the usual cause. "
                    + (f"The last complete checkpoint is {latest}: free some space, then continue with "
                       f"python ragen_mini.py --resume {run_dir}" if latest
                       else "No complete checkpoint was saved yet."))


def describe_os_error(error):
    """A file the run could not write or read, in words: which file, why, what to do."""
    where = f"{error.filename}: " if error.filename else ""
    advice = {errno.ENOSPC: "The disk is full: free some space.",
              errno.EDQUOT: "The disk quota is used up: free some space.",
              errno.EACCES: "Choose a folder you may write (run_dir=...), or change its permissions.",
              errno.EPERM: "Choose a folder you may write (run_dir=...), or change its permissions.",
              errno.EROFS: "That disk is read-only: choose another run_dir=..."}
    message = (f"error: {where}{error.strerror or error}. "
               f"{advice.get(error.errno, 'Check that path, or choose another run_dir=...')}")
    folder = os.path.dirname(str(error.filename or ""))
    for run_dir in (folder, os.path.dirname(folder)):  # the run folder, or the folder above a file in it
        latest = latest_checkpoint(run_dir) if run_dir else None
        if latest:
            return (f"{message} The last complete checkpoint is {latest}; "
                    f"continue with python ragen_mini.py --resume {run_dir}")
    return message


def drop_metrics_after(run_dir, iteration):
    """On resume: forget the metrics lines written after ITERATION, which the resumed run writes again (as
    evaluation.drop_samples_after forgets the samples; launch.forget_after calls both). A damaged line (a crash
    while writing, an edit) is moved to metrics.jsonl.damaged; a missing metrics.jsonl is started again; both
    are said."""
    path = os.path.join(run_dir, "metrics.jsonl")
    rows = []
    if os.path.exists(path):
        rows, damaged = plots.read_metrics(run_dir, with_damaged=True)
        if damaged:
            with open(path + ".damaged", "ab") as f:  # kept aside, not lost: the user may want to look
                f.writelines(raw if raw.endswith(b"\n") else raw + b"\n" for _, _, raw in damaged)
            tqdm.write(f"{path}: left out {len(damaged)} damaged line(s), kept in {path}.damaged: "
                       + "; ".join(f"line {number}: {why}" for number, why, _ in damaged))
    else:
        tqdm.write(f"{path} is missing: it starts again with the resumed iterations")
    with open(path, "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows if row["iteration"] <= iteration)


def run_summary(run_dir, seconds):
    """What a finished run did, in a few lines: evaluations, time, where its files are."""
    rows = plots.read_metrics(run_dir) if os.path.exists(os.path.join(run_dir, "metrics.jsonl")) else []
    evals = [(row["iteration"], row["eval/success"]) for row in rows if "eval/success" in row]
    lines = [f"done: {rows[-1]['iteration'] if rows else 0} iterations in {seconds / 60:.1f} min of training"]
    if evals:
        best = max(evals, key=lambda e: e[1])
        lines.append(f"eval success: {evals[0][1]:.3f} at iteration {evals[0][0]}, {evals[-1][1]:.3f} at the "
                     f"end (iteration {evals[-1][0]}), best {best[1]:.3f} (iteration {best[0]})")
    timings = ("perf/iteration_s", "perf/rollout_s", "perf/generate_s", "perf/decode_steps", "perf/logprob_s",
               "perf/update_s")
    # iteration 1 compiles and warms up; rows written by older code (a resumed run) may lack a timing
    timed = [row for row in rows if row["iteration"] >= 2 and all(key in row for key in timings)]
    if timed:
        median = {key: float(np.median([row[key] for row in timed])) for key in timings}
        # not a difference of medians
        host = float(np.median([row["perf/rollout_s"] - row["perf/generate_s"] for row in timed]))
        lines.append(f"time per iteration (median after the first): {median['perf/iteration_s']:.2f} s = "
                     f"rollout {median['perf/rollout_s']:.2f} s (generation "
                     f"{median['perf/generate_s']:.2f} s in {median['perf/decode_steps']:.0f} "
                     f"decoding steps, envs and tokenizer {host:.2f} s) + scoring "
                     f"{median['perf/logprob_s']:.2f} s + update {median['perf/update_s']:.2f} s, "
                     "evaluations apart")
    lines.append(f"run folder: {run_dir} (metrics.jsonl, plots.png, viewer.html: open it in a browser; the "
                 "evaluation samples in samples.jsonl, as text in samples.md)")
    latest = latest_checkpoint(run_dir)
    if latest:
        lines.append(f"checkpoint: {latest}; "
                     f"continue with: python ragen_mini.py --resume {run_dir} "
                     "(train.iterations=N to go past the end)")
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


def write_file(path, text, mode="w"):
    """Write (mode "w") or append ("a") text. A full disk fails at the file's close, with an OSError that
    names no file: this one names it, and a file this call created is removed, not left empty."""
    existed = os.path.exists(path)
    try:
        with open(path, mode, encoding="utf-8") as f:
            f.write(text)
    except OSError as error:
        if not existed:
            with contextlib.suppress(OSError):
                os.remove(path)
        raise OSError(error.errno, error.strerror, path) from None


class Clock:
    """Phase timings; on a GPU it waits for the queued work at phase boundaries only."""

    def __init__(self, device):
        self.device, self.times = device, [time.perf_counter()]
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()

    def lap(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.times.append(time.perf_counter())
        return self.times[-1] - self.times[-2]


def write_metrics(run_dir, metrics):
    """One iteration's metrics (a flat dict of numbers) as one JSON line of RUN_DIR/metrics.jsonl."""
    write_file(os.path.join(run_dir, "metrics.jsonl"), json.dumps(metrics) + "\n", "a")


def rollout_metrics(trajectories, prefix):
    """The rollout/* (or eval/*) metrics of a list of Trajectory."""
    rewards = np.array([t.reward for t in trajectories])
    turns = [turn for t in trajectories for turn in t.turns]
    groups = {}
    for t in trajectories:  # echo-trap detector: do the N samples of one prompt still say different things?
        groups.setdefault(t.group, []).append(tuple((turn.think, tuple(turn.actions)) for turn in t.turns))
    return {f"{prefix}/success": float(np.mean([t.success for t in trajectories])),
            f"{prefix}/reward_mean": float(rewards.mean()),
            f"{prefix}/reward_std": float(rewards.std()),
            f"{prefix}/actions_mean": float(np.mean([t.num_actions for t in trajectories])),
            f"{prefix}/response_tokens": float(np.mean([t.response_tokens for t in trajectories])),
            f"{prefix}/think_tokens": float(np.mean([t.think_tokens for t in trajectories])),
            f"{prefix}/valid_action_frac": float(np.mean([turn.format_ok for turn in turns]))
            if turns else 0.0,
            f"{prefix}/effective_action_frac": sum(t.num_effective for t in trajectories)
            / max(1, sum(t.num_actions for t in trajectories)),
            f"{prefix}/distinct_response_frac": float(np.mean([len(set(g)) / len(g)
                                                               for g in groups.values()])),
            **thought_metrics(trajectories, turns, prefix)}


# the format line's placeholder: a thought holding it is a copy, not a thought
PLACEHOLDER = "[your thoughts]"


def thought_metrics(trajectories, turns, prefix):
    """What the <think> texts say: think_tokens_median (over turns), placeholder_thoughts (the share of turns
    whose thought copies the prompt's "[Your thoughts]") and distinct_thoughts: the share of distinct
    first-turn thoughts across different seeds, one per seed. Different states with one thought is the Echo
    Trap's template; distinct_response_frac, within a group, is one state's N samples."""
    first = {}
    for t in trajectories:
        if t.turns:
            first.setdefault(t.seed, t.turns[0].think)
    return {f"{prefix}/think_tokens_median": float(np.median([turn.think_tokens for turn in turns]))
            if turns else 0.0,
            f"{prefix}/placeholder_thoughts": float(np.mean([PLACEHOLDER in turn.think.lower()
                                                             for turn in turns]))
            if turns else 0.0,
            f"{prefix}/distinct_thoughts": len(set(first.values())) / max(1, len(first))}


def report_zero_signal(metrics, since):
    """Say it once when a stretch of iterations begins in which no group's rewards differ: then every
    advantage is the critic's noise, or zero under GRPO, and the policy learns nothing. Returns the
    iteration the current stretch began at (None while there is signal)."""
    iteration = metrics["iteration"]
    if metrics["rollout/zero_signal"] and since is None:
        tqdm.write(f"iteration {iteration}: within every group all rewards are equal (valid-answer fraction "
                   f"{metrics['rollout/valid_action_frac']:.2f}): nothing to learn from. If the model never "
                   "answers in the format, give it a format warm-up (warmup.steps).")
        return iteration
    if not metrics["rollout/zero_signal"] and since is not None:
        stretch = iteration - since
        tqdm.write(f"iteration {iteration}: rewards differ within groups again, after {stretch} "
                   f"iteration{'s' * (stretch != 1)} without a learning signal")
        return None
    return since


def group_reward_std(rewards, group_ids):
    """Mean over groups of the in-group reward std: the paper's uncertainty signal (it drops before a
    collapse)."""
    return float(starpo.group_stats(rewards, group_ids)[2].mean())  # the filter's own (Bessel) std


def save_checkpoint(run, iteration):
    """RUN_DIR/checkpoint: actor/ (from_pretrained-loadable, with the tokenizer), reference/, and state.pt
    with the critic, the optimisers and every random state. Written beside the last one and swapped in
    only when complete. Ctrl-C, SIGTERM and SIGHUP wait until the save is done (held_signals): a second
    Ctrl-C cannot cut it in half. A kill can: recover_checkpoint mends what it leaves."""
    path = os.path.join(run.run_dir, "checkpoint")
    tmp, old = path + ".tmp", path + ".old"
    with held_signals():
        for leftover in (tmp, old):  # from a run that crashed while saving
            shutil.rmtree(leftover, ignore_errors=True)
        try:
            run.actor.save_pretrained(os.path.join(tmp, "actor"))
            run.chat.tokenizer.save_pretrained(os.path.join(tmp, "actor"))
            if run.reference is not None:
                run.reference.save_pretrained(os.path.join(tmp, "reference"))
            torch.save(dict(iteration=iteration,
                            critic=run.critic.state_dict() if run.critic is not None else None,
                            optimizers={name: opt.state_dict() for name, opt in run.optimizers.items()},
                            rng=dict(numpy=run.seed_rng.bit_generator.state, torch=torch.get_rng_state(),
                                     cuda=(torch.cuda.get_rng_state_all() if torch.cuda.is_available()
                                           else None),
                                     generator=run.generator.get_state())), os.path.join(tmp, "state.pt"))
        # a full disk: OSError, torch.save's RuntimeError or safetensors' own error
        except Exception as error:
            shutil.rmtree(tmp, ignore_errors=True)
            raise save_failed(run.run_dir, tmp, error) from None
        if os.path.isdir(path):  # swap in only a complete checkpoint
            os.rename(path, old)
        os.rename(tmp, path)
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def held_signals():
    """Ctrl-C, SIGTERM and SIGHUP that come inside the block are held, not lost: the first one acts when the
    block ends, through the handler that was there before (a handler of our own, not a blocked signal mask,
    since the OS may hand a signal to any of torch's threads)."""
    came = []
    previous = {signum: signal.signal(signum, lambda signum, frame: came.append(signum))
                for signum in CtrlC.SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in came[:1]:
            signal.raise_signal(signum)


def recover_checkpoint(run_dir):
    """Mend what a save killed between its two renames leaves behind: no RUN_DIR/checkpoint, but a complete
    checkpoint.tmp (the newer, written in full before the renames) or checkpoint.old, which becomes the
    checkpoint. A copy is complete when its state.pt, written last, is a whole zip. -> what was done, or
    None."""
    path = os.path.join(run_dir, "checkpoint")
    if os.path.lexists(path):
        return None
    for candidate in (path + ".tmp", path + ".old"):
        state = os.path.join(candidate, "state.pt")
        if not os.path.islink(candidate) and os.path.isfile(state) and zipfile.is_zipfile(state):
            os.rename(candidate, path)
            return (f"{run_dir}: the last save was cut short; its complete copy "
                    f"{os.path.basename(candidate)} is the checkpoint now")
    return None
