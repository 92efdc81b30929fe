"""The paper's seven findings, one command each: run what a finding needs with SmolLM2 and reasoning on, then
draw its figure and tables from the run folders, with a verdict for each of the paper's claims by the decision
rule below (docs/findings.md holds the prose).

    python findings.py                         # the findings, their runs, and which are done
    python findings.py 1                       # run Finding 1's runs (several at once on one GPU), then draw
    python findings.py all                     # the whole protocol: every run, then every finding drawn
    python findings.py all --dry-run           # what `all` would start, command by command; starts nothing
    python findings.py 1 --parallel 3          # how many runs at once, on every visible GPU together
                                               #   (default auto: as many as the GPUs' free memory holds,
                                               #   each run counted at its arm's measured peak, need_gib)
    python findings.py 1 --draw --runs results/runs/findings   # draw only, from the kept runs

Runs go to RUNS_DIR/NAME (default runs/findings), one log beside each; a run that ended normally is marked
done (NAME.done) and is not run again. Each folder a run starts in carries the mark NAME/.findings-run, and
only such a folder, not done, is removed (to start its run again). A run folder there with neither mark (kept
runs, a run of your own) makes the run mode refuse, so results/runs/findings is only read (--draw). The
figure goes to plots/findingN.png, the tables to results/findings/findingN.md (and the screen); --draw with
none of the finding's runs there is refused and writes nothing. Finding 2 reads the thoughts of each run's
evaluation records (samples.jsonl: the same evaluation seeds each time), kept as thoughts.json by --keep,
and Finding 7 the actions answered beside them (answers.json):

    # config, compacted metrics, thoughts and answers into results/runs/findings
    python findings.py --keep runs/findings/*
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import config
import envs
import plots
import viewer
from tools.compact_metrics import compact_row, rounded

# ======================================================================================================
# The protocol: every run, its budget and its seeds
# ======================================================================================================
SOKOBAN, BANDIT, FROZENLAKE = ("configs/smollm2.yaml", "configs/smollm2-bandit.yaml",
                               "configs/smollm2-frozenlake.yaml")
# No time limit: a run stopped by the clock has fewer iterations than its neighbour on a less busy card, and
# then two arms are not compared at one budget. Evaluations every 10 iterations, as the paper's. 16 sampled
# episodes an evaluation (not the preset's 4) give Finding 7's count of thoughts that contradict their answer
# 16 seeds x 10 turns an evaluation. Micro-batches of 32,768 tokens hold a run's memory to two runs a card (the
# sums are the same at any micro-batch size, but the logged entropy is a mean of micro-batch means, so it is
# fixed here for every run). A run with no step done in 10 minutes ends with its stacks in its log.
COMMON = ["train.time_limit_min=0", "eval.every=10", "eval.samples=16", "checkpoint.every=0",
          "algo.micro_batch_tokens=32768", "train.stall_min=10"]
LONG = ["train.iterations=200", *COMMON]   # the paper's length: Finding 1's methods and every Sokoban arm
SHORT = ["train.iterations=100", *COMMON]  # FrozenLake and the Bandit, compared among themselves
# StarPO: no filter, a KL, clip 0.2
VANILLA = ["algo.filter_ratio=1.0", "algo.kl_coef=0.001", "algo.clip_high=0.2"]
GRPO = ["algo.estimator=grpo", *VANILLA]
SEEDS = (0, 1, 2)


def seeded(prefix, preset, budget, overrides=()):
    """{PREFIX-seedS: (preset, overrides)} for the three seeds."""
    return {f"{prefix}-seed{s}": (preset, [*budget, f"seed={s}", *overrides]) for s in SEEDS}


RUNS = {  # name -> (preset, overrides), in the order `all` runs them: what the verdicts need most comes first
    # Finding 1: the three methods, at the paper's 200 iterations
    **seeded("sokoban-starpo-s", SOKOBAN, LONG),
    **seeded("sokoban-ppo", SOKOBAN, LONG, VANILLA),
    **seeded("sokoban-grpo", SOKOBAN, LONG, GRPO),
    # Finding 4 where collapse happens (vanilla GRPO), and the optimiser-step control: with 32 x 8 trajectories
    # and mini-batches of 32, no filter takes 8 steps an iteration and keeping 25% takes 2; mini-batches of 8
    # give the filtered run 8 steps again (micro-batches may not be larger than a mini-batch)
    **seeded("sokoban-grpo-filter0.25", SOKOBAN, LONG, [*GRPO, "algo.filter_ratio=0.25"]),
    **seeded("sokoban-grpo-filter0.5", SOKOBAN, LONG, [*GRPO, "algo.filter_ratio=0.5"]),
    **seeded("sokoban-grpo-filter0.25-minibatch8", SOKOBAN, LONG,
             [*GRPO, "algo.filter_ratio=0.25", "algo.mini_batch_size=8", "algo.micro_batch_size=8"]),
    # Finding 5: StarPO-S with one of its changes undone
    **seeded("sokoban-starpo-s-with-kl", SOKOBAN, LONG, ["algo.kl_coef=0.001"]),
    **seeded("sokoban-starpo-s-no-clip-higher", SOKOBAN, LONG, ["algo.clip_high=0.2"]),
    # Finding 7: reasoning off against on, on each env
    **seeded("sokoban-no-think", SOKOBAN, LONG, ["rollout.think=false"]),
    **seeded("frozenlake-starpo-s", FROZENLAKE, SHORT),
    **seeded("frozenlake-no-think", FROZENLAKE, SHORT, ["rollout.think=false"]),
    **seeded("bandit-starpo-s", BANDIT, SHORT),
    **seeded("bandit-no-think", BANDIT, SHORT, ["rollout.think=false"]),
    # Finding 6: 5 actions per turn; the group shapes, one seed each (the paper's own numbers show no effect)
    **seeded("sokoban-5-actions-per-turn", SOKOBAN, LONG, ["env.max_turns=5", "env.max_actions_per_turn=5"]),
    "sokoban-n4-seed0": (SOKOBAN, [*LONG, "seed=0", "rollout.groups=64", "rollout.group_size=4"]),
    "sokoban-n16-seed0": (SOKOBAN, [*LONG, "seed=0", "rollout.groups=16", "rollout.group_size=16"]),
}
# The kept runs of before this protocol, under the names they were kept with: each is read as seed 0 of its arm
OLD_NAMES = {"sokoban-starpo-s-with-kl-seed0": "sokoban-starpo-s-with-kl",
             "sokoban-starpo-s-no-clip-higher-seed0": "sokoban-starpo-s-no-clip-higher",
             "sokoban-5-actions-per-turn-seed0": "sokoban-5-actions-per-turn",
             "sokoban-n4-seed0": "sokoban-n4", "sokoban-n16-seed0": "sokoban-n16"}


def seeds_of(prefix):
    return [f"{prefix}-seed{s}" for s in SEEDS]


ARMS = {  # label -> its runs (one per seed): what the tables and the verdicts compare
    "StarPO-S": seeds_of("sokoban-starpo-s"),
    "vanilla PPO": seeds_of("sokoban-ppo"),
    "vanilla GRPO": seeds_of("sokoban-grpo"),
    "GRPO, filter 0.25": seeds_of("sokoban-grpo-filter0.25"),
    "GRPO, filter 0.5": seeds_of("sokoban-grpo-filter0.5"),
    "GRPO, filter 0.25, mini-batch 8": seeds_of("sokoban-grpo-filter0.25-minibatch8"),
    "StarPO-S with the KL term": seeds_of("sokoban-starpo-s-with-kl"),
    "StarPO-S without clip-higher": seeds_of("sokoban-starpo-s-no-clip-higher"),
    "64 prompts x 4": ["sokoban-n4-seed0"],
    "16 prompts x 16": ["sokoban-n16-seed0"],
    "5 actions per turn": seeds_of("sokoban-5-actions-per-turn"),
    "Sokoban, reasoning off": seeds_of("sokoban-no-think"),
    "FrozenLake, reasoning on": seeds_of("frozenlake-starpo-s"),
    "FrozenLake, reasoning off": seeds_of("frozenlake-no-think"),
    "Bandit, reasoning on": seeds_of("bandit-starpo-s"),
    "Bandit, reasoning off": seeds_of("bandit-no-think"),
    # kept runs that the protocol does not repeat (Finding 4 moved to GRPO, where collapse happens): shown
    # where they exist, never run
    "PPO, filter 0.25 (earlier run)": ["sokoban-ppo-filter0.25"],
    "PPO, filter 0.5 (earlier run)": ["sokoban-ppo-filter0.5"],
}
EARLIER = {label for label, names in ARMS.items() if not set(names) <= set(RUNS)}
WINDOW = 10  # iterations in a window of a per-iteration metric (its first, its last; I(X;R)'s plot)


# ======================================================================================================
# Reading a run folder
# ======================================================================================================
def evals(rows):
    """[(iteration, eval/success)] of a run's metrics rows."""
    return [(r["iteration"], r["eval/success"]) for r in rows if "eval/success" in r]


def series(rows, key):
    return [(r["iteration"], r[key]) for r in rows if key in r]


def read(run_dir):
    """The metrics rows of RUN_DIR, or None when it has none."""
    return plots.read_metrics(run_dir) if os.path.exists(os.path.join(run_dir, "metrics.jsonl")) else None


def done(run_dir):
    """run_all marks a run that ended normally with RUN_DIR.done beside its folder: a run that crashed right
    after an evaluation has metrics that look finished, but no mark."""
    return os.path.exists(os.path.normpath(run_dir) + ".done")


def folder(runs, name):
    """RUNS/NAME, or the folder of its older name (OLD_NAMES) when only that has metrics."""
    path = os.path.join(runs, name)
    old = os.path.join(runs, OLD_NAMES.get(name, name))
    return old if not os.path.exists(os.path.join(path, "metrics.jsonl")) and os.path.exists(
        os.path.join(old, "metrics.jsonl")) else path


def has_results(run_dir):
    """Its metrics end with an evaluation after iteration 0 (what the figures and tables need)."""
    rows = read(run_dir)
    return bool(rows) and rows[-1]["iteration"] > 0 and "eval/success" in rows[-1]


@dataclass
class Run:
    """A run folder read once: its name (the folder's), metrics rows, config (empty without config.yaml)."""
    name: str
    dir: str
    rows: list
    cfg: dict

    @property
    def seed(self):
        found = re.search(r"seed(\d+)$", self.name)  # a hand-built folder without its config
        return self.cfg.get("seed", int(found.group(1)) if found else 0)


def load(runs, name):
    """The Run of NAME under RUNS, or None when it has no evaluation yet."""
    run_dir = folder(runs, name)
    rows = read(run_dir)
    if not rows or not evals(rows):
        return None
    path = os.path.join(run_dir, "config.yaml")
    cfg = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            cfg = config.parse_yaml(f.read()) or {}
    return Run(os.path.basename(run_dir), run_dir, rows, cfg)


def arm_runs(runs, label):
    return [run for name in ARMS[label] if (run := load(runs, name))]


def version(cfg):
    """The code and the budget a run ran with, in words. Runs record their commit in config.yaml (code.commit,
    code.clean); a run from before that is an "unknown commit", a version of its own."""
    if not cfg:
        return "no config.yaml"
    run, train = cfg.get("code") or {}, cfg.get("train", {})
    code = f"commit {run['commit'][:10]}" if run.get("commit") else "unknown commit"
    if run.get("commit") and run.get("clean") is not True:
        code += " with uncommitted changes"  # the commit alone does not say what ran
    limit = train.get("time_limit_min") or 0
    return (f"{code}; {train.get('iterations')} iterations, "
            f"{f'a time limit of {limit:g} minutes' if limit else 'no time limit'}, micro-batches of "
            f"{cfg.get('algo', {}).get('micro_batch_tokens')} tokens")


def versions(runs_):
    """-> ({run name: its letter}, lines to put above a table): letters A, B, ... in order of appearance;
    with more than one version, a visible mark first."""
    letters = {}
    for run in runs_:
        letters.setdefault(version(run.cfg), chr(ord("A") + len(letters)))
    of_run = {run.name: letters[version(run.cfg)] for run in runs_}
    lines = [f"- version {letter}: {label}" for label, letter in letters.items()]
    if len(letters) > 1:
        lines.insert(0, f"**⚠ mixed versions: these runs come from {len(letters)} code versions or budgets "
                        f"({', '.join(letters.values())}); a verdict on runs of more than one is marked †, "
                        "provisional until they are run again on one version.**")
    return of_run, lines


TOKENS_KEY = "perf/trained_tokens"  # the trainer logs the sampled tokens an update trains on


def kept_trajectories(cfg):
    """The trajectories an update trains on: the groups the filter keeps (starpo.select_groups_by_reward_std:
    max(1, int(filter_ratio x groups))) times the group size."""
    rollout = cfg["rollout"]
    return max(1, int(cfg["algo"]["filter_ratio"] * rollout["groups"])) * rollout["group_size"]


def optimiser_steps(run):
    """-> (actor steps an iteration, how known): ppo_epochs passes over the kept trajectories in mini-batches
    of mini_batch_size rows (ragen_mini.update), worked out from the config."""
    if not run.cfg:
        return None, "no config"
    algo = run.cfg["algo"]
    return algo["ppo_epochs"] * math.ceil(kept_trajectories(run.cfg) / algo["mini_batch_size"]), "config"


def trained_tokens(run):
    """-> (sampled tokens an update trains on, how known). Not logged (the kept runs' compacted metrics): the
    kept trajectories times the mean sampled tokens of all trajectories, an estimate (the filter keeps the
    groups whose rewards differ most, not groups of average length)."""
    logged = [v for _, v in series(run.rows, TOKENS_KEY)]
    if logged:
        return statistics.mean(logged), "logged"
    lengths = [v for _, v in series(run.rows, "rollout/response_tokens")]
    if not run.cfg or not lengths:
        return None, "not logged"
    return kept_trajectories(run.cfg) * statistics.mean(lengths), "estimate"


def updates_cell(runs_):
    """'8 / ≈20,700' for an arm: optimiser steps and trained tokens per iteration, means over its runs, with
    how they are known (config: worked out from it; ≈: an estimate enters the mean; not logged)."""
    steps, tokens = [optimiser_steps(r) for r in runs_], [trained_tokens(r) for r in runs_]
    step_values, token_values = [v for v, _ in steps if v is not None], [v for v, _ in tokens if v is not None]
    step_text = (f"{statistics.mean(step_values):g}" + (" (config)" if steps[0][1] == "config" else "")
                 if step_values else "not logged")
    token_text = (("≈" if any(how == "estimate" for _, how in tokens) else "")
                  + f"{statistics.mean(token_values):,.0f}" if token_values else "not logged")
    return f"{step_text} / {token_text}"


# ======================================================================================================
# What a run is measured by
# ======================================================================================================
def mean_sd(values):
    return (statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0)


def fmt(values, digits=3):
    """'0.312 ± 0.021 (n=3)', or the one value."""
    mean, sd = mean_sd(values)
    return (f"{mean:.{digits}f} ± {sd:.{digits}f} (n={len(values)})" if len(values) > 1
            else f"{mean:.{digits}f} (n=1)")


def nearest_eval(rows, iteration):
    """Eval success at the evaluation nearest ITERATION (the earlier of two as near)."""
    return min(evals(rows), key=lambda p: (abs(p[0] - iteration), p[0]))[1]


def evals_until(rows, iteration):
    """The evaluations up to the one nearest ITERATION (a run compared at another's length)."""
    points = evals(rows)
    last = min(points, key=lambda p: (abs(p[0] - iteration), p[0]))[0]
    return [p for p in points if p[0] <= last]


def deepest_fall(points):
    """-> (drop, (iteration, value) of the peak, (iteration, value) of the trough): the largest fall of
    an evaluation below an earlier one (0 with the peak at the end when success never fell)."""
    best, fall = points[0], (0.0, points[0], points[0])
    for point in points:
        best = max(best, point, key=lambda p: p[1])
        if best[1] - point[1] > fall[0]:
            fall = (best[1] - point[1], best, point)
    return fall if fall[0] > 0 else (0.0, best, best)


def first_change(points, factor, start=5, window=3):
    """The first iteration at which the moving mean (over WINDOW iterations) of a metric crosses FACTOR times
    its mean over the first START iterations (below it for a factor under 1, above it over 1), or None. The
    window opens after the START iterations it is measured against; short, as GRPO falls within 10."""
    values = [v for _, v in points]
    if len(values) < start + window:
        return None
    base = factor * statistics.mean(values[:start])
    for k in range(start, len(values) - window + 1):
        mean = statistics.mean(values[k:k + window])
        if (mean < base) if factor < 1 else (mean > base):
            return points[k + window - 1][0]
    return None


def halves_at(rows, key):
    return first_change(series(rows, key), 0.5)


def first_at_most(rows, key, limit):
    return next((i for i, v in series(rows, key) if v <= limit), None)


def window(rows, key, last=False):
    """-> (mean, standard error, n) of KEY over the first (or the last) WINDOW iterations with a value, or
    None. The standard error treats the iterations as independent draws, each from its own rollout."""
    values = [v for i, v in series(rows, key) if i > 0]
    values = values[-WINDOW:] if last else values[:WINDOW]
    if len(values) < 2:
        return None
    return statistics.mean(values), statistics.stdev(values) / math.sqrt(len(values)), len(values)


def windows(rows, key):
    """[(middle iteration, mean, standard error)] over consecutive windows of WINDOW iterations (1-10, 11-20,
    ...), a window with fewer than 2 values left out: what Finding 2 plots of I(X;R)."""
    by_window = {}
    for i, v in series(rows, key):
        if i > 0:
            by_window.setdefault((i - 1) // WINDOW, []).append(v)
    return [(w * WINDOW + (WINDOW + 1) / 2, statistics.mean(vs), statistics.stdev(vs) / math.sqrt(len(vs)))
            for w, vs in sorted(by_window.items()) if len(vs) > 1]


def trend(rows, key):
    """'falls', 'rises' or 'flat': the last window against the first, beyond twice the standard error of
    their difference, or None when there are no two windows."""
    first, last = window(rows, key), window(rows, key, last=True)
    if not first or not last:
        return None
    diff, se = last[0] - first[0], math.hypot(first[1], last[1])
    return "falls" if diff < -2 * se else "rises" if diff > 2 * se else "flat"


# ======================================================================================================
# Thoughts and the actions answered: hallucinated reasoning
# ======================================================================================================
def records_of(run_dir, what):
    """{evaluation title: {seed (as a string): [each turn's WHAT: "think" or "actions"]}} from the records of
    RUN_DIR/samples.jsonl (a damaged line is left out and said), or None without that file."""
    path = os.path.join(run_dir, "samples.jsonl")
    if not os.path.isfile(path):
        return None
    records, skipped = viewer.read_samples(path)
    for note in skipped:
        print(f"skipped: {note}", file=sys.stderr)
    out = {}
    for record in records:
        out.setdefault(record["title"], {})[str(record["seed"])] = [turn[what] for turn in record["turns"]]
    return out


def thoughts_of(run_dir):
    """{evaluation title: {seed (as a string): [the thought of each turn]}}: RUN_DIR/thoughts.json (kept
    runs), else the records of RUN_DIR/samples.jsonl. SystemExit when the run has neither."""
    kept = os.path.join(run_dir, "thoughts.json")
    if os.path.exists(kept):
        with open(kept) as f:
            return json.load(f)
    thoughts = records_of(run_dir, "think")
    if thoughts is None:
        raise SystemExit(f"error: {run_dir} has no samples.jsonl (nor thoughts.json): no thoughts to read. A "
                         "run of an older ragen-mini wrote samples.md, which is no longer read")
    return thoughts


def answers_of(run):
    """{evaluation title: {seed: [the actions of each turn]}}: answers.json (kept runs), else samples.jsonl.
    Runs kept before answers were kept have neither; on the Bandit their answers are still known at an
    evaluation that scored 1.000: success is answering the high arm, so every episode answered it."""
    kept = os.path.join(run.dir, "answers.json")
    if os.path.exists(kept):
        with open(kept) as f:
            return json.load(f)
    answers = records_of(run.dir, "actions")
    if answers is not None or run.cfg.get("env", {}).get("name") != "bandit":
        return answers or {}
    high = envs.make_env("bandit", **run.cfg["env"].get("kwargs") or {}).high_name
    solved = {f"Evaluation at iteration {i}" for i, success in evals(run.rows) if success == 1.0}
    return {title: {seed: [[high]] for seed in by_seed} for title, by_seed in thoughts_of(run.dir).items()
            if title in solved}


# direction words that name no move: the prompt's count of the actions remaining ("9 actions left") and the
# idioms the kept runs' thoughts use ("pick up the box", "break it down", "make up to 10 actions", "right-hand")
NO_MOVE = re.compile(r"\b(actions?|turns?|moves?) left\b|\bpick(s|ed|ing)? up\b|\b(break|breaks|breaking|broke|broken)"
                     r" (it |this |the puzzle )?down\b|\bup to \d|\b(right|left)-hand\b", re.IGNORECASE)


def named(thought, actions):
    """The actions (or the Bandit's arms) a thought names, as whole words in any case, once NO_MOVE's phrases
    are taken out: "You should go left." names Left; "Pick up the box, 9 actions left." names none."""
    text = NO_MOVE.sub(" ", thought)
    return {a for a in actions if re.search(rf"\b{re.escape(a)}\b", text, re.IGNORECASE)}


def hallucinations(run):
    """Thoughts that point elsewhere: over the evaluation turns whose answer is known (iteration 0 on), how
    many have a thought (not empty), how many thoughts name an action, and how many name actions but none of the ones answered (the paper's
    "hallucinated" reasoning: the thought says Phoenix, the answer is Dragon). -> dict, or None with no
    thoughts or no known answer."""
    if not run.cfg or not run.cfg["rollout"]["think"] or not any(
            os.path.exists(os.path.join(run.dir, f)) for f in ("thoughts.json", "samples.jsonl")):
        return None
    env = run.cfg["env"]
    actions = envs.make_env(env["name"], **env.get("kwargs") or {}).actions
    thoughts, answers = thoughts_of(run.dir), answers_of(run)
    count = {"evaluations": 0, "turns": 0, "thinking": 0, "naming": 0, "elsewhere": 0, "by_evaluation": []}
    for title, by_seed in answers.items():
        if not title.startswith("Evaluation at iteration") or title not in thoughts:
            continue
        turns = elsewhere = 0
        for seed, answered in by_seed.items():
            for thought, taken in zip(thoughts[title].get(seed, []), answered):
                names = named(thought, actions)
                turns += 1
                count["thinking"] += bool(thought.strip())  # an empty think block is no thought to check
                count["naming"] += bool(names)
                elsewhere += bool(names) and not names & set(taken)
        count["evaluations"] += 1
        count["turns"] += turns
        count["elsewhere"] += elsewhere
        count["by_evaluation"].append((int(title.split()[-1]), elsewhere, turns))
    return count if count["turns"] else None


# ======================================================================================================
# The decision rule: one claim of the paper, two arms (or one arm early and late), one measure
# ======================================================================================================
RULE = """\
Each claim of the paper is tested on one measure, as a comparison of two arms (two settings, or one
setting early and late in training), with the direction the paper reports. Over the seeds of each arm,
d is the difference of the seed means and SE its standard error: sqrt(sA²/nA + sB²/nB) for two arms of
different runs, sd/sqrt(n) for one arm measured twice (sd: the standard deviation of its n differences).
The verdict is:

- *not testable here* when the paper's own numbers for the two arms show no effect: they differ by less
  than twice the standard error of that difference on its 256 evaluation seeds;
- *open* when an arm has fewer than 3 seeds;
- *reproduced* when d goes the paper's way by more than 2 SE and the paper's way holds in at least 2 of 3
  seeds (seed s of one arm against seed s of the other; two thirds of them with more seeds);
- *contradicted* when the same holds the other way;
- *not reproduced* otherwise: no difference beyond twice its standard error, or not in 2 of 3 seeds.

A claim that the paper sees no gain is *reproduced* unless the gain is larger than 2 SE and holds in 2 of
3 seeds (then *contradicted*). A claim about an event in each run (success falls by more than the noise
floor; an indicator falls before success does) is *reproduced* when it goes the paper's way in at least
2 of 3 runs, *not reproduced* otherwise, and *open* with fewer than 3 runs it applies to. The noise floor
is twice the standard error of the difference of two evaluations, 2 x sqrt(2) x the standard deviation
of the iteration-0 evaluations of the seed-0 Sokoban runs with reasoning on, which start alike. A verdict
on runs of more than one code version or budget carries the mark †."""


@dataclass(frozen=True)
class Claim:
    """One claim: the measure of arm A against arm B (B None: A's own runs, measured by MEASURE_B), with the
    paper's DIRECTION: 1 A above B, -1 A below B, 0 A no higher than B (the paper sees no gain). An event
    claim (EVENTS) counts its arms' runs, where the event applies, that go the paper's way (EXPECT)."""
    text: str
    measure: str
    a: tuple
    b: str = None
    measure_b: str = None
    direction: int = 1
    paper: tuple = None  # the paper's success of A and of B, where it reports them
    expect: bool = True


def shared_iteration(runs_):
    """The last evaluation every run reached: runs of unequal length are compared there."""
    return min(evals(run.rows)[-1][0] for run in runs_)


def fell(run, floor, k):
    return None if floor is None else deepest_fall(evals_until(run.rows, k))[0] > floor


def rose_then_fell(run, floor, k):
    drop, (_, peak), _ = deepest_fall(evals_until(run.rows, k))
    return None if floor is None else drop > floor and peak - evals(run.rows)[0][1] > floor


def warned_before(run, key):
    """Did in-group reward std or entropy halve before KEY's change (success halving; the thoughts reaching
    3 tokens or fewer)? None when KEY never changes (nothing to warn of), and for the thoughts of a run
    with reasoning off."""
    if key == "rollout/think_tokens_median" and not run.cfg.get("rollout", {}).get("think", True):
        return None
    at = (halves_at(run.rows, key) if key == "rollout/success"
          else first_at_most(run.rows, key, 3))
    if at is None:
        return None
    warnings = [halves_at(run.rows, k) for k in ("rollout/group_reward_std_all", "train/entropy")]
    return any(w is not None and w < at for w in warnings)


MEASURES = {  # name -> (value of a run, given the comparison's shared iteration and noise floor; digits)
    "eval success at the shared iteration": (lambda run, ctx: nearest_eval(run.rows, ctx["k"]), 3),
    "best eval success up to the shared iteration":
        (lambda run, ctx: max(v for _, v in evals_until(run.rows, ctx["k"])), 3),
    "deepest fall of eval success": (lambda run, ctx: deepest_fall(evals_until(run.rows, ctx["k"]))[0], 3),
    **{f"{what}, {'last' if last else 'first'} {WINDOW} iterations":
       (lambda run, ctx, key=key, last=last: (window(run.rows, key, last) or (None,))[0], digits)
       for what, key, digits in [("think tokens per turn (median)", "rollout/think_tokens_median", 1),
                                 ("distinct first thoughts", "rollout/distinct_thoughts", 3),
                                 ("I(X;R), nats", "rollout/thought_mi", 3)]
       for last in (False, True)},
}
EVENTS = {  # name -> whether it happened in a run (None: does not apply to it)
    "eval success falls by more than the noise floor": lambda run, ctx: fell(run, ctx["floor"], ctx["k"]),
    "eval success rises by more than the noise floor, then falls by more":
        lambda run, ctx: rose_then_fell(run, ctx["floor"], ctx["k"]),
    "reward std or entropy halves before rollout success halves":
        lambda run, ctx: warned_before(run, "rollout/success"),
    "reward std or entropy halves before the thoughts reach 3 tokens":
        lambda run, ctx: warned_before(run, "rollout/think_tokens_median"),
    "a thought names only actions other than the one answered":
        lambda run, ctx: None if (h := hallucinations(run)) is None else h["elsewhere"] > 0,
}


def noise_floor(runs):
    """-> (iteration-0 evaluations, their standard deviation, the floor) of the runs under RUNS that start
    alike (seed 0, Sokoban, 10 turns of one action, reasoning on), or None with fewer than 3 of them."""
    alike = []
    for name in [*RUNS, *(n for label in EARLIER for n in ARMS[label])]:
        run = load(runs, name)
        if run and run.cfg and run.seed == 0 and evals(run.rows)[0][0] == 0 and (
                run.cfg["env"]["name"], run.cfg["env"]["max_turns"], run.cfg["env"]["max_actions_per_turn"],
                run.cfg["rollout"]["think"]) == ("sokoban", 10, 1, True):
            alike.append(evals(run.rows)[0][1])
    if len(alike) < 3:
        return None
    sd = statistics.stdev(alike)
    return alike, sd, 2 * math.sqrt(2) * sd


def floor_line(floor):
    if floor is None:
        return "Noise floor: fewer than 3 seed-0 Sokoban runs with reasoning on here, so no fall is judged."
    values, sd, limit = floor
    return (f"Noise floor: {len(values)} seed-0 Sokoban runs with reasoning on, alike up to iteration 0, "
            f"evaluated there at {min(values):.3f}-{max(values):.3f} (sd {sd:.3f}): a gap between two "
            f"evaluations below {limit:.3f} is noise.")


def paper_shows_no_effect(a, b, seeds=256):
    return abs(a - b) < 2 * math.sqrt(a * (1 - a) / seeds + b * (1 - b) / seeds)


def judge(claim, runs, floor):
    """-> (table row, verdict word) of CLAIM by the decision rule (RULE), from the runs under RUNS."""
    arms = claim.a if isinstance(claim.a, tuple) else (claim.a,)
    a_runs = [run for label in arms for run in arm_runs(runs, label)]
    b_runs = arm_runs(runs, claim.b) if claim.b else a_runs
    if not a_runs or not b_runs:
        missing = ", ".join(label for label in (*arms, claim.b) if label and not arm_runs(runs, label))
        return f"| {claim.text} | {claim.measure} | not run yet: {missing} | | | | | open |", "open"
    ctx = {"k": shared_iteration(a_runs + b_runs), "floor": floor and floor[2]}

    def mark(entering):  # the runs whose values enter the verdict
        return " †" if len({version(run.cfg) for run in entering}) > 1 else ""
    if claim.measure in EVENTS:
        happened = {run.name: EVENTS[claim.measure](run, ctx) for run in a_runs}
        applies = [run for run in a_runs if happened[run.name] is not None]
        way = sum(happened[run.name] == claim.expect for run in applies)
        word = ("open" if len(applies) < 3 else "reproduced" if 3 * way >= 2 * len(applies)
                else "not reproduced")
        seen = [run.name for run in applies if happened[run.name]]
        found = (f"in {len(seen)} of {len(applies)} runs: {', '.join(seen) or 'none'}" if applies
                 else "no run it applies to")
        return (f"| {claim.text} | {claim.measure}{' (expected)' if claim.expect else ' (not expected)'} | "
                f"{found} | | | | {way} of {len(applies)} runs | {word}{mark(applies)} |", word)
    fn_a, digits = MEASURES[claim.measure]
    fn_b = MEASURES[claim.measure_b or claim.measure][0]
    a = {run.seed: v for run in a_runs if (v := fn_a(run, ctx)) is not None}
    b = {run.seed: v for run in b_runs if (v := fn_b(run, ctx)) is not None}
    if not a or not b:  # runs from before the metric was logged, or too short for a window
        return f"| {claim.text} | {claim.measure} | not logged in these runs | | | | | open |", "open"
    mixed = mark([run for run in a_runs if run.seed in a] + [run for run in b_runs if run.seed in b])
    measure, label_a, label_b = claim.measure, claim.a, claim.b
    if not claim.b:  # one arm early and late: "think tokens ..., last 10 iterations" against the first 10
        (measure, label_a), label_b = claim.measure.rsplit(", ", 1), claim.measure_b.rsplit(", ", 1)[1]
    cells = f"{label_a}: {fmt(list(a.values()), digits)} | {label_b}: {fmt(list(b.values()), digits)}"
    pairs = [(s, a[s] - b[s]) for s in sorted(a) if s in b]
    paper_way = sum((d > 0) if claim.direction > 0 else (d < 0) if claim.direction < 0 else (d <= 0)
                    for _, d in pairs)
    against = sum((d < 0) if claim.direction > 0 else (d > 0) for _, d in pairs)
    d = statistics.mean(a.values()) - statistics.mean(b.values())
    by_seed = ", ".join(f"seed {s}: {diff:+.{digits}f}" for s, diff in pairs)
    if claim.paper and paper_shows_no_effect(*claim.paper):
        word, se_text = "not testable here", f"paper: {claim.paper[0]:.3f} against {claim.paper[1]:.3f}"
    elif min(len(a), len(b)) < 3:
        word, se_text = "open", f"needs 3 seeds an arm ({by_seed})"
    else:
        se = (statistics.stdev(dict(pairs).values()) / math.sqrt(len(pairs)) if not claim.b
              else math.sqrt(statistics.variance(a.values()) / len(a) + statistics.variance(b.values()) / len(b)))
        beyond, toward = abs(d) > 2 * se, d * claim.direction > 0
        if claim.direction == 0:
            word = "contradicted" if d > 2 * se and 3 * against >= 2 * len(pairs) else "reproduced"
        elif beyond and toward and 3 * paper_way >= 2 * len(pairs):
            word = "reproduced"
        elif beyond and not toward and 3 * against >= 2 * len(pairs):
            word = "contradicted"
        else:
            word = "not reproduced"
        se_text = f"{se:.{digits}f} ({abs(d) / se:.1f} SE)" if se else "0"
    return (f"| {claim.text} | {measure} | {cells} | {d:+.{digits}f} | {se_text} | "
            f"{paper_way} of {len(pairs)} seeds | {word}{mixed if word != 'not testable here' else ''} |",
            word)


def verdict_table(claims, runs, floor):
    lines = ["| the paper's claim | measure | A | B | A − B | its standard error | the paper's way in | "
             "verdict |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    return lines + [judge(claim, runs, floor)[0] for claim in claims]


# ======================================================================================================
# The findings: each draw function returns (markdown tables, figure) from the run folders under `runs`
# ======================================================================================================
def run_table(runs_, letters, floor):
    """One row per run: its version, length, and its evaluations' start, best, deepest fall and end."""
    lines = ["| run | seed | version | iterations | eval success at 0 | best (iteration) | "
             "deepest fall: from (iteration) to (iteration) | at the end | falls beyond the floor |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run in runs_:
        points = evals(run.rows)
        best = max(points, key=lambda p: p[1])
        drop, (peak_at, peak), (trough_at, trough) = deepest_fall(points)
        falls = "—" if floor is None else "yes" if drop > floor[2] else "no"
        where = f": {peak:.3f} ({peak_at}) to {trough:.3f} ({trough_at})" if drop else " (never below an earlier one)"
        lines.append(f"| {run.name} | {run.seed} | {letters[run.name]} | {run.rows[-1]['iteration']} | "
                     f"{points[0][1]:.3f} | {best[1]:.3f} ({best[0]}) | {drop:.3f}{where} | "
                     f"{points[-1][1]:.3f} | {falls} |")
    return lines


def draw_arms(runs, labels, claims, title, think_panel=False):
    """Eval success over iterations for arms (each a method's seeds, or one run): the mean over an arm's seeds
    with their range (min to max) shaded, and a seed that ran longer than the others on alone, dashed; a table row an arm with mean ± std over seeds, compared also at one
    iteration, the end of the shortest run (each run's evaluation nearest it), with the optimiser steps and
    trained tokens of an iteration; one row a run; the verdicts. With think_panel, the arms' median think
    tokens per turn (mean over seeds) in a second panel and column."""
    fig, axes = plots.plt.subplots(1, 2 if think_panel else 1, figsize=(14 if think_panel else 8, 5),
                                   squeeze=False)
    found = [(label, arm_runs(runs, label)) for label in labels]
    found = [(label, group) for label, group in found if group or label not in EARLIER]
    every = [run for _, group in found for run in group]
    shared = shared_iteration(every) if every else 0
    letters, version_lines = versions(every)
    floor = noise_floor(runs)
    think_head = " think tokens per turn, median: first / last iteration |" if think_panel else ""
    lines = [f"| arm | seeds | versions | iterations | optimiser steps / trained tokens per iteration | "
             f"eval success at 0 | at the end | at iteration ≈{shared} | best |{think_head}",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |" + " --- |" * think_panel]
    for color, (label, group) in enumerate(found):
        if not group:
            lines.append(f"| {label} | not run yet | | | | | | | |" + " |" * think_panel)
            continue
        rows_of = [run.rows for run in group]
        # the shortest seed's evaluation iterations, where every seed has one within 2 (a run stopped by its
        # time limit evaluates at its last iteration, not on the eval.every grid)
        grid = [i for i, _ in min((evals(rows) for rows in rows_of), key=len)]
        common = [i for i in grid if all(min(abs(j - i) for j, _ in evals(rows)) <= 2 for rows in rows_of)]
        by_iteration = [[nearest_eval(rows, i) for rows in rows_of] for i in common]
        axes[0, 0].plot(common, [statistics.mean(v) for v in by_iteration], color=f"C{color % 10}", marker="o",
                        markersize=3, label=f"{label} ({len(group)} seed{'s' * (len(group) > 1)})")
        if len(group) > 1:
            axes[0, 0].fill_between(common, [min(v) for v in by_iteration], [max(v) for v in by_iteration],
                                    color=f"C{color % 10}", alpha=0.2)
            for run in group:  # a seed that ran longer than the others goes on alone, dashed
                beyond = [(i, v) for i, v in evals(run.rows) if i >= common[-1]]
                if beyond[-1][0] > common[-1] + 2:  # as far as `common` looks for a seed's evaluation
                    axes[0, 0].plot(*zip(*beyond), color=f"C{color % 10}", linestyle="--", linewidth=1,
                                    label=f"{label}, seed {run.seed} alone")
        line = (f"| {label} | {', '.join(str(run.seed) for run in group)} | "
                f"{', '.join(letters[run.name] for run in group)} | "
                f"{', '.join(str(rows[-1]['iteration']) for rows in rows_of)} | {updates_cell(group)} | "
                f"{fmt([evals(rows)[0][1] for rows in rows_of])} | {fmt([evals(rows)[-1][1] for rows in rows_of])} | "
                f"{fmt([nearest_eval(rows, shared) for rows in rows_of])} | "
                f"{fmt([max(v for _, v in evals(rows)) for rows in rows_of])} |")
        if think_panel:
            thinks = [series(rows, "rollout/think_tokens_median") for rows in rows_of]
            common = sorted(set.intersection(*(set(i for i, _ in think) for think in thinks)))
            mean = [statistics.mean(dict(think)[i] for think in thinks) for i in common]
            axes[0, 1].plot(common, mean, color=f"C{color % 10}", label=label)
            for run, think in zip(group, thinks):
                beyond = [(i, v) for i, v in think if common and i >= common[-1]]
                if len(group) > 1 and beyond and beyond[-1][0] > common[-1] + 2:
                    axes[0, 1].plot(*zip(*beyond), color=f"C{color % 10}", linestyle="--", linewidth=1)
            line += f" {mean[0]:.1f} / {mean[-1]:.1f} |" if mean else " 0 / 0 (reasoning off) |"
        lines.append(line)
    axes[0, 0].set(xlabel="iteration", ylabel="eval success (256 held-out seeds)", title=title)
    if think_panel:
        axes[0, 1].set(xlabel="iteration", ylabel="think tokens per turn (median; mean over seeds)",
                       title="Reasoning length over training")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    steps_note = ("Optimiser steps: actor steps an iteration, from the config (ppo_epochs x the kept "
                  "trajectories / mini_batch_size); trained tokens: the sampled tokens an update trains on "
                  f"({TOKENS_KEY}), ≈ an estimate (kept trajectories x the mean sampled tokens of all) where "
                  "the metrics do not log them.")
    tables = [*version_lines, "", *lines, "", steps_note, "", floor_line(floor), "",
              *run_table(every, letters, floor), "", "Verdicts (the decision rule: docs/findings.md):", "",
              *verdict_table(claims, runs, floor)]
    return "\n".join(tables), fig


METHODS = ["StarPO-S", "vanilla PPO", "vanilla GRPO"]
FELL = "eval success falls by more than the noise floor"
SUCCESS = "eval success at the shared iteration"


def draw_finding1(runs):
    claims = [Claim("vanilla GRPO collapses", FELL, "vanilla GRPO"),
              Claim("vanilla PPO collapses", FELL, "vanilla PPO"),
              Claim("StarPO-S does not collapse", FELL, "StarPO-S", expect=False),
              Claim("vanilla StarPO rises first, then collapses",
                    "eval success rises by more than the noise floor, then falls by more",
                    ("vanilla PPO", "vanilla GRPO")),
              Claim("PPO (critic) is more stable than GRPO: GRPO falls deeper", "deepest fall of eval success",
                    "vanilla GRPO", "vanilla PPO")]
    return draw_arms(runs, METHODS, claims, "Sokoban, SmolLM2-135M, reasoning on")


def draw_finding4(runs):
    deepest = "deepest fall of eval success"
    claims = [Claim("keeping 25% of the groups makes vanilla GRPO more stable", deepest, "GRPO, filter 0.25",
                    "vanilla GRPO", direction=-1),
              Claim("keeping 50% of the groups makes vanilla GRPO more stable", deepest, "GRPO, filter 0.5",
                    "vanilla GRPO", direction=-1),
              Claim("... with as many optimiser steps as no filter (the filter, not fewer updates)", deepest,
                    "GRPO, filter 0.25, mini-batch 8", "vanilla GRPO", direction=-1),
              Claim("keeping 25% of the groups raises GRPO's success", SUCCESS, "GRPO, filter 0.25",
                    "vanilla GRPO"),
              Claim("... with as many optimiser steps as no filter", SUCCESS, "GRPO, filter 0.25, mini-batch 8",
                    "vanilla GRPO"),
              Claim("StarPO-S (filter 0.25, no KL, clip-higher) ends above vanilla PPO", SUCCESS, "StarPO-S",
                    "vanilla PPO"),
              Claim("keeping 50% of the groups raises PPO's success", SUCCESS, "PPO, filter 0.5 (earlier run)",
                    "vanilla PPO"),
              Claim("keeping 25% of the groups raises PPO's success", SUCCESS,
                    "PPO, filter 0.25 (earlier run)", "vanilla PPO")]
    labels = ["vanilla GRPO", "GRPO, filter 0.25", "GRPO, filter 0.5", "GRPO, filter 0.25, mini-batch 8",
              "vanilla PPO", "PPO, filter 0.5 (earlier run)", "PPO, filter 0.25 (earlier run)", "StarPO-S"]
    return draw_arms(runs, labels, claims, "Uncertainty filtering, Sokoban")


def draw_finding5(runs):
    best = "best eval success up to the shared iteration"
    claims = [Claim("removing the KL term raises peak success", best, "StarPO-S", "StarPO-S with the KL term"),
              Claim("clip-higher raises peak success", best, "StarPO-S", "StarPO-S without clip-higher")]
    labels = ["StarPO-S", "StarPO-S with the KL term", "StarPO-S without clip-higher", "vanilla PPO"]
    return draw_arms(runs, labels, claims, "KL term and clip-higher, Sokoban")


def draw_finding6(runs):
    # the paper's Table 2 (Sokoban, 16 -> 20.3 and 4 -> 20.7 responses per prompt) and Table 3 (1 -> 12.1 and
    # 5 -> 28.1 actions per turn), docs/paper.md §5
    claims = [Claim("4 responses per prompt beat 16", SUCCESS, "64 prompts x 4", "16 prompts x 16",
                    paper=(0.207, 0.203)),
              Claim("5 actions per turn beat 1", SUCCESS, "5 actions per turn", "StarPO-S", paper=(0.281, 0.121))]
    labels = ["64 prompts x 4", "StarPO-S", "16 prompts x 16", "5 actions per turn"]
    table, fig = draw_arms(runs, labels, claims, "Rollout quality: responses per prompt, actions per turn",
                           think_panel=True)
    lines = ["| run | eval valid answers at 0 | lowest (iteration) | rollout success, first / last "
             f"{WINDOW} iterations |", "| --- | --- | --- | --- |"]
    for label in labels:
        for run in arm_runs(runs, label):
            valid = series(run.rows, "eval/valid_action_frac")
            low = min(valid, key=lambda p: p[1]) if valid else None
            lines.append(f"| {run.name} | {f'{valid[0][1]:.2f}' if valid else 'not logged'} | "
                         f"{f'{low[1]:.2f} ({low[0]})' if low else ''} | "
                         f"{windows_cell(run.rows, 'rollout/success', 3)} |")
    return table + "\n\nAnswers in the format, in evaluation and in training:\n\n" + "\n".join(lines), fig


def quote(text):
    """A model's text inside a markdown table cell: its line breaks as spaces and its bars escaped, so it stays
    text in its cell; 120 characters at most."""
    return "“" + " ".join(text.split()).replace("|", "\\|")[:120] + "”"


def reasoning_runs(runs):
    """The finding's runs with reasoning on: Sokoban (every arm), then the Bandit and FrozenLake."""
    labels = [label for label in ARMS if "reasoning off" not in label]
    return [run for label in labels for run in arm_runs(runs, label)
            if run.cfg.get("rollout", {}).get("think", True)]


def windows_cell(rows, key, digits, with_se=False):
    """'first / last' window means of KEY (with their standard errors), or 'not logged'."""
    first, last = window(rows, key), window(rows, key, last=True)
    if not first or not last:
        return "not logged"
    return " / ".join(f"{w[0]:.{digits}f}" + (f" ± {w[1]:.{digits}f}" if with_se else "") for w in (first, last))


ECHO_ARMS = [*METHODS, "Bandit, reasoning on", "FrozenLake, reasoning on"]


def draw_finding2(runs):
    """The Echo Trap: the first-turn thought of the same evaluation seeds at iteration 0 and at the end (the
    paper's Table 1); per run, the thoughts' length, the share of distinct first thoughts and I(X;R) early
    and late; I(X;R) over 10-iteration windows with its standard error in the figure."""
    fig, axes = plots.plt.subplots(1, 3, figsize=(16, 4.5))
    lines = ["| env | seed | iteration 0 | the end |", "| --- | --- | --- | --- |"]
    for name in ["bandit-starpo-s-seed0", "sokoban-starpo-s-seed0", "frozenlake-starpo-s-seed0"]:
        run = load(runs, name)
        if not run:
            lines.append(f"| {name} | not run yet | | |")
            continue
        thoughts = thoughts_of(run.dir)
        last = [t for t in thoughts if t.startswith("Evaluation at iteration")][-1]
        first = thoughts.get("Evaluation at iteration 0", {})
        for seed, turns in list(first.items())[:4]:
            end = thoughts[last].get(seed, [""])
            lines.append(f"| {name.split('-')[0]} | {seed} | {quote(turns[0] if turns else '')} | "
                         f"{quote(end[0] if end else '')} ({last.split()[-1]}) |")
    shown = reasoning_runs(runs)
    letters, version_lines = versions(shown)
    measures = [f"| run | version | think tokens (median): iteration 1 / first {WINDOW} / last {WINDOW} | "
                f"2 tokens or fewer first at | distinct first thoughts, first / last {WINDOW} | "
                f"in evaluation: at 0 / at the end | "
                f"I(X;R) nats, first / last {WINDOW} (± SE) | I(X;R): last against first |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run in shown:
        think = series(run.rows, "rollout/think_tokens_median")
        in_eval = series(run.rows, "eval/distinct_thoughts")
        measures.append(
            f"| {run.name} | {letters[run.name]} | "
            f"{f'{think[0][1]:.1f} / ' if think else ''}{windows_cell(run.rows, 'rollout/think_tokens_median', 1)} | "
            f"{first_at_most(run.rows, 'rollout/think_tokens_median', 2) or 'never'} | "
            f"{windows_cell(run.rows, 'rollout/distinct_thoughts', 3)} | "
            f"{f'{in_eval[0][1]:.3f} / {in_eval[-1][1]:.3f}' if in_eval else 'not logged'} | "
            f"{windows_cell(run.rows, 'rollout/thought_mi', 3, with_se=True)} | "
            f"{trend(run.rows, 'rollout/thought_mi') or ''} |")
    # the figure: the finding's own arms, a colour each, a line style a seed (the table has every run)
    for color, label in enumerate(ECHO_ARMS):
        for k, run in enumerate(arm_runs(runs, label)):
            style = dict(color=f"C{color}", linestyle=["-", "--", ":"][k % 3], label=run.name)
            for ax, key in zip(axes[:2], ["rollout/think_tokens_median", "rollout/distinct_thoughts"]):
                if points := series(run.rows, key):
                    ax.plot(*zip(*points), **style)
            if points := windows(run.rows, "rollout/thought_mi"):
                xs, ys, ses = zip(*points)
                axes[2].errorbar(xs, ys, yerr=[2 * se for se in ses], capsize=2, marker="o", markersize=3,
                                 **style)
    for ax, title in zip(axes, ["think tokens per turn, median", "distinct first thoughts across seeds",
                                f"I(X;R), nats: {WINDOW}-iteration windows, ± 2 SE"]):
        ax.set(xlabel="iteration", title=title)
        ax.grid(alpha=0.3)
    if axes[2].get_legend_handles_labels()[0]:  # runs from before I(X;R) was logged have no windows
        axes[2].legend(fontsize=6)
    distinct = [f"distinct first thoughts, {w} {WINDOW} iterations" for w in ("last", "first")]
    mi = [f"I(X;R), nats, {w} {WINDOW} iterations" for w in ("last", "first")]
    claims = [Claim(f"{label}: {what}", measures_[0], label, measure_b=measures_[1], direction=-1)
              for label in ECHO_ARMS
              for what, measures_ in [("the thoughts become one template", distinct),
                                      ("the thoughts stop depending on the state", mi)]]
    tables = [*lines, "", *version_lines, "", *measures, "",
              "The share of distinct first thoughts counts how many different first-turn thoughts the rollout's "
              "seeds get (diversity); I(X;R) asks how much a thought depends on its state, from the model's own "
              "log-probabilities of each thought under every prompt (rollout.mi_samples thoughts of each of "
              "rollout.mi_groups groups, as a run's config.yaml has them: 4 of 16 now, 1 of 16 in the kept "
              "runs).", "",
              "Verdicts (the decision rule: docs/findings.md):", "", *verdict_table(claims, runs, None)]
    return "\n".join(tables), fig


def thoughts_shrink(run):
    if not run.cfg.get("rollout", {}).get("think", True):
        return "reasoning off"
    return first_at_most(run.rows, "rollout/think_tokens_median", 3) or "never"


def draw_finding3(runs):
    """Collapse indicators: for each Sokoban run, when rollout success, the valid answers, in-group reward std
    and entropy halve (against their first 5 iterations, moving mean of 3), when the replies grow by half,
    when the thoughts reach 3 tokens, and whether its evaluations fall beyond the noise floor."""
    floor = noise_floor(runs)
    shown = [run for label in ARMS if not label.startswith(("FrozenLake", "Bandit"))
             for run in arm_runs(runs, label)]
    letters, version_lines = versions(shown)
    lines = ["| run | version | eval: deepest fall | beyond the floor | eval valid answers, lowest (iteration) | "
             "rollout success halves at | valid answers halve at | replies grow by half at | "
             "reward std halves at | entropy halves at | thoughts at 3 tokens or fewer at |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    fig, axes = plots.plt.subplots(1, 3, figsize=(15, 4))
    for color, run in enumerate(shown):
        drop = deepest_fall(evals(run.rows))[0]
        valid = series(run.rows, "eval/valid_action_frac")
        low = min(valid, key=lambda p: p[1]) if valid else None
        at = {key: (halves_at(run.rows, key) or "never") if series(run.rows, key) else f"no {key} logged"
              for key in ("rollout/success", "rollout/valid_action_frac", "rollout/group_reward_std_all",
                          "train/entropy")}
        grows = first_change(series(run.rows, "rollout/response_tokens"), 1.5) or "never"
        lines.append(f"| {run.name} | {letters[run.name]} | {drop:.3f} | "
                     f"{'—' if floor is None else 'yes' if drop > floor[2] else 'no'} | "
                     f"{f'{low[1]:.2f} ({low[0]})' if low else 'not logged'} | "
                     f"{' | '.join(str(at[k]) for k in ('rollout/success', 'rollout/valid_action_frac'))} | "
                     f"{grows} | {at['rollout/group_reward_std_all']} | {at['train/entropy']} | "
                     f"{thoughts_shrink(run)} |")
        for ax, key in zip(axes, ["eval/success", "rollout/group_reward_std_all", "train/entropy"]):
            points = series(run.rows, key)
            if not points:  # a run logged before the metric existed, or a damaged file: left out, said so
                print(f"note: {run.name} has no {key} in its metrics.jsonl: not in that panel")
                continue
            xs, ys = zip(*points)
            ax.plot(xs, ys, color=f"C{color % 10}", label=run.name,
                    marker="o" if key.startswith("eval") else None, markersize=2)
            ax.set(xlabel="iteration", title=key)
            ax.grid(alpha=0.3)
    axes[0].legend(fontsize=6)
    everything = tuple(label for label in ARMS if not label.startswith(("FrozenLake", "Bandit")))
    claims = [Claim("reward std and entropy fall before success collapses",
                    "reward std or entropy halves before rollout success halves", everything),
              Claim("... and before the reasoning collapses to a template",
                    "reward std or entropy halves before the thoughts reach 3 tokens", everything)]
    tables = [*version_lines, "", floor_line(floor), "", *lines, "",
              "Halves: the first iteration at which the moving mean over 3 iterations is below half its mean "
              "over iterations 1-5 (grows by half: above 1.5 times it).", "",
              "Verdicts (the decision rule: docs/findings.md):", "", *verdict_table(claims, runs, floor)]
    return "\n".join(tables), fig


def draw_finding7(runs):
    """Reasoning: on against off on each env (three seeds each), think length over training, and the
    thoughts that name an action other than the one answered."""
    labels = ["StarPO-S", "Sokoban, reasoning off", "FrozenLake, reasoning on", "FrozenLake, reasoning off",
              "Bandit, reasoning on", "Bandit, reasoning off"]
    think = [f"think tokens per turn (median), {w} {WINDOW} iterations" for w in ("last", "first")]
    claims = [*(Claim(f"{env}: reasoning shrinks over training", think[0], label, measure_b=think[1],
                      direction=-1)
                for env, label in [("Sokoban", "StarPO-S"), ("FrozenLake", "FrozenLake, reasoning on"),
                                   ("Bandit", "Bandit, reasoning on")]),
              *(Claim(f"{env}: reasoning brings no gain", SUCCESS, on, off, direction=0)
                for env, on, off in [("Sokoban", "StarPO-S", "Sokoban, reasoning off"),
                                     ("FrozenLake", "FrozenLake, reasoning on", "FrozenLake, reasoning off"),
                                     ("Bandit", "Bandit, reasoning on", "Bandit, reasoning off")]),
              *(Claim(f"{env}: hallucinated reasoning appears",
                      "a thought names only actions other than the one answered", label)
                for env, label in [("Sokoban", "StarPO-S"), ("FrozenLake", "FrozenLake, reasoning on"),
                                   ("Bandit", "Bandit, reasoning on")])]
    table, fig = draw_arms(runs, labels, claims, "Reasoning on and off", think_panel=True)
    lines = ["| run | evaluations with known answers | turns | turns with a thought | thoughts naming an action | "
             "naming only actions not answered | share of turns with a thought | share of naming thoughts | "
             "by evaluation: iteration (pointing elsewhere of turns) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label in ["StarPO-S", "FrozenLake, reasoning on", "Bandit, reasoning on"]:
        for run in arm_runs(runs, label):
            h = hallucinations(run)
            if h is None:
                lines.append(f"| {run.name} | 0: its answers were not kept (answers.json) | | | | | | | |")
                continue
            lines.append(f"| {run.name} | {h['evaluations']} | {h['turns']} | {h['thinking']} | {h['naming']} | "
                         f"{h['elsewhere']} | {h['elsewhere'] / h['thinking'] if h['thinking'] else 0:.3f} | "
                         f"{h['elsewhere'] / h['naming'] if h['naming'] else 0:.3f} | "
                         + ", ".join(f"{i} ({e} of {n})" for i, e, n in sorted(h["by_evaluation"]) if e) + " |")
    return (table + "\n\nHallucinated reasoning: the evaluation thoughts that name actions (or arms) but none "
            "of those the turn answered (a direction word in a phrase that names no move, such as \"pick up the "
            "box\", is not read as one: findings.NO_MOVE). The answers are answers.json's (samples.jsonl's); runs "
            "kept without them have known answers only on the Bandit, at evaluations that scored 1.000 (every "
            "answer the high arm).\n\n" + "\n".join(lines)), fig


FINDINGS = {  # number -> (the paper's claim, in short; the runs it needs; its drawing)
    "1": ("multi-turn RL is unstable; PPO (critic) more stable than GRPO",
          [n for m in METHODS for n in ARMS[m]], draw_finding1),
    "2": ("the Echo Trap: reasoning collapses to repeated templates",
          [n for m in ECHO_ARMS for n in ARMS[m]], draw_finding2),
    "3": ("reward std and entropy fall before success collapses",
          [n for n in RUNS if n.startswith("sokoban") and "no-think" not in n], draw_finding3),
    "4": ("uncertainty filtering improves stability",
          [n for m in ["vanilla GRPO", "GRPO, filter 0.25", "GRPO, filter 0.5", "GRPO, filter 0.25, mini-batch 8",
                       "vanilla PPO", "StarPO-S"] for n in ARMS[m]], draw_finding4),
    "5": ("KL removal and clip-higher improve peak success",
          [n for m in ["StarPO-S", "StarPO-S with the KL term", "StarPO-S without clip-higher", "vanilla PPO"]
           for n in ARMS[m]], draw_finding5),
    "6": ("rollout quality: fewer responses per prompt, a few actions per turn",
          [n for m in ["64 prompts x 4", "StarPO-S", "16 prompts x 16", "5 actions per turn"] for n in ARMS[m]],
          draw_finding6),
    "7": ("reasoning shrinks over training and helps little without fine-grained rewards",
          [n for m in ["StarPO-S", "Sokoban, reasoning off", "FrozenLake, reasoning on",
                       "FrozenLake, reasoning off", "Bandit, reasoning on", "Bandit, reasoning off"]
           for n in ARMS[m]], draw_finding7),
}


# ======================================================================================================
# Running and keeping
# ======================================================================================================
def command(name, run_dir, extra=()):
    """EXTRA (--set) comes last, so it wins over the budget and the run's own overrides."""
    preset, overrides = RUNS[name]
    return [sys.executable, "ragen_mini.py", "--config", preset, *overrides, *extra, f"run_dir={run_dir}"]


MARK = ".findings-run"  # run_all's mark in each run folder it makes: the only folders it may remove


def own(run_dir):
    return os.path.exists(os.path.join(run_dir, MARK))


def not_ours(runs, names):
    """The folders of RUNS that run_all did not make and would touch or mix with: those of NAMES, and every
    run folder (metrics.jsonl), such as kept runs. A done run is left out: NAME.done is run_all's too, and a
    done run is never started again."""
    if not os.path.isdir(runs):
        return []
    return sorted(entry.path for entry in os.scandir(runs)
                  if entry.is_dir() and not own(entry.path) and not done(entry.path)
                  and (entry.name in names or os.path.exists(os.path.join(entry.path, "metrics.jsonl"))))


# What a run may reserve on a GPU: the largest peak its arm reached (PEAK_KEY, the caching allocator's peak,
# which the trainer logs and --keep keeps) plus MARGIN_GIB for its process's CUDA context and the libraries'
# workspaces (two runs of 46.8 and 48.2 GiB peaks took 97.1 GiB of the card, results/findings/times.md's
# two-H200 machine); an arm none of whose runs is at hand gets RUN_GIB, the largest peak measured on the
# SmolLM2 presets under the protocol's micro-batches (Sokoban with reasoning off, 54.2 GiB) plus the margin.
PEAK_KEY = "perf/peak_reserved_gb"
MARGIN_GIB = 2
RUN_GIB = 56
KEPT = "results/runs/findings"


def arm_of(name):
    """The run's name without its seed: the runs of one arm share their memory needs."""
    return re.sub(r"-seed\d+$", "", name)


def need_gib(name, folders):
    """GiB run NAME may reserve: the largest PEAK_KEY of any run of its arm in FOLDERS (the run folders of
    RUNS and the kept runs) plus MARGIN_GIB, rounded up to a tenth, else RUN_GIB."""
    peaks = []
    for runs in filter(os.path.isdir, folders):
        for entry in os.scandir(runs):
            if entry.is_dir() and arm_of(entry.name) == arm_of(name):
                peaks += [row[PEAK_KEY] for row in read(entry.path) or [] if PEAK_KEY in row]
    return math.ceil((max(peaks) + MARGIN_GIB) * 10) / 10 if peaks else RUN_GIB  # a tenth up, never down


def free_gpu_gib():
    """The free memory of each visible GPU in GiB, asked of a child process (the CUDA contexts it makes go
    with it), or None without a GPU."""
    ask = ("import torch; print(*[torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())]"
           " if torch.cuda.is_available() else [])")
    answer = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True).stdout.split()
    return [int(free) / 2**30 for free in answer] or None


def device_names(count):
    """What CUDA_VISIBLE_DEVICES gives a run for each of the COUNT visible GPUs: the entries of the variable
    where it is set (its ids or UUIDs), else 0 .. COUNT-1."""
    shown = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return shown[:count] if len(shown) >= count else [str(i) for i in range(count)]


def place(need, free, used):
    """The GPU with the most room left that holds a run of NEED GiB (FREE: each GPU's free GiB when the runs
    began, USED: what the runs started on it may reserve), or None.

    >>> place(50, [139.0, 139.0], [100.4, 50.2]), place(50, [139.0], [100.4]), place(30, [139.0], [100.4])
    (1, None, 0)
    """
    room = [f - u for f, u in zip(free, used)]
    fits = [i for i, r in enumerate(room) if r >= need]
    return max(fits, key=lambda i: room[i]) if fits else None


def at_once_limit(requested, needs, free):
    """How many runs may run at once: REQUESTED ("auto" or a number) for the runs of NEEDS ({name: GiB it may
    reserve}) on GPUs with FREE GiB (None: no GPU: one at a time unless a number is given; auto: as many as the
    memory holds, found as each run starts). Refused with the reason, before any run starts: a run that no GPU
    holds even alone, and a number that the GPUs cannot hold for the largest runs among NEEDS.

    >>> at_once_limit("auto", {"a": 50.2, "b": 50.2}, [139.0]), at_once_limit("2", {"a": 50.2, "b": 58}, [139.0])
    (inf, 2)
    >>> at_once_limit("auto", {"a": 50.2}, None), at_once_limit("3", {"a": 50.2}, None)
    (1, 3)
    """
    if free is None:
        return 1 if requested == "auto" else int(requested)
    for name, need in needs.items():
        if need > max(free):
            raise SystemExit(f"error: {name} may reserve {need:g} GiB (its arm's measured peak and "
                             f"findings.MARGIN_GIB, or findings.RUN_GIB) and the GPUs have "
                             f"{', '.join(f'{f:.1f}' for f in free)} GiB free: free a GPU, or run on a larger one")
    if requested == "auto":
        return math.inf
    largest, used, fit = sorted(needs.values(), reverse=True)[:int(requested)], [0.0] * len(free), 0
    for need in largest:
        gpu = place(need, free, used)
        if gpu is None:
            break
        used[gpu], fit = used[gpu] + need, fit + 1
    if fit < len(largest):
        raise SystemExit(f"error: --parallel {requested}: the {len(largest)} largest of these runs may reserve "
                         f"{' + '.join(f'{n:g}' for n in largest)} GiB, and the GPUs have "
                         f"{', '.join(f'{f:.1f}' for f in free)} GiB free: at most {fit} at once; give --parallel "
                         "auto or a smaller number")
    return int(requested)


def run_all(names, runs, parallel="auto", extra=(), dry_run=False, free=None):
    """Run the runs not done yet, each logging to RUNS/NAME.log; RUNS/NAME.done marks one that ended normally.
    They start in NAMES' order, each on the GPU with the most room left for its need (need_gib) of FREE (each
    visible GPU's free GiB; None: no GPU), at most PARALLEL at once (at_once_limit); a run that fits nowhere
    waits for one to end. Refuses, starting nothing, when RUNS holds a folder it did not make. DRY_RUN: print
    what it would start, where and in what order, and touch nothing."""
    todo = [n for n in names if not done(os.path.join(runs, n))]
    if found := not_ours(runs, todo):
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise SystemExit(f"error: {found[0]}{more} is not a run findings.py started (no {MARK}: kept runs, "
                         "or one of yours), and it never removes or runs beside one: nothing started; choose "
                         "another --runs (default runs/findings) or move the folder away")
    needs = {name: need_gib(name, [runs, KEPT]) for name in todo}
    limit = at_once_limit(parallel, needs, free)
    devices = device_names(len(free)) if free else []
    used, running = [0.0] * len(free or []), []

    def next_gpu(name):  # the index of the GPU it starts on now (None without a GPU), or False: it waits
        if len(running) >= limit:
            return False
        gpu = place(needs[name], free, used) if free else None
        return False if free and gpu is None else gpu

    if dry_run:  # the first runs start at once; the rest in order, as runs end
        for name in names:
            if name not in todo:
                print(f"done already: {name}")
        iterations, waiting = 0, False
        for name in todo:
            cmd = command(name, os.path.join(runs, name), extra)
            iterations += int([a for a in cmd if a.startswith("train.iterations=")][-1].split("=")[1])
            gpu = False if waiting else next_gpu(name)
            waiting = gpu is False
            if not waiting:
                running.append(name)
                if free:
                    used[gpu] += needs[name]
            where = "when a run ends" if waiting else "at once" + (f" on GPU {devices[gpu]}" if free else "")
            print(f"would start {name} ({where}; {needs[name]:g} GiB): {' '.join(cmd[1:])}")
        at = "as many as the GPUs' free memory holds" if limit == math.inf else limit
        print(f"{len(todo)} runs to start, {iterations:,} iterations in all, {at} at a time")
        return
    os.makedirs(runs, exist_ok=True)
    while todo or running:
        while todo and (gpu := next_gpu(todo[0])) is not False:
            name = todo.pop(0)
            run_dir = os.path.join(runs, name)
            if own(run_dir):
                shutil.rmtree(run_dir)  # a run of ours cut short starts again
            os.makedirs(run_dir)
            open(os.path.join(run_dir, MARK), "w").close()  # first: if the run is cut short, ours to remove
            env = dict(os.environ, **({"CUDA_VISIBLE_DEVICES": devices[gpu]} if free else {}))
            with open(os.path.join(runs, f"{name}.log"), "w") as log:
                process = subprocess.Popen(command(name, run_dir, extra), stdout=log, stderr=subprocess.STDOUT,
                                           env=env)
            if free:
                used[gpu] += needs[name]
            running.append((name, process, gpu))
            where = f" on GPU {devices[gpu]} ({needs[name]:g} GiB)" if free else ""
            print(f"started {name}{where}: {' '.join(command(name, run_dir, extra)[1:])}", flush=True)
        time.sleep(5)
        for name, process, gpu in [r for r in running if r[1].poll() is not None]:
            running.remove((name, process, gpu))
            if free:
                used[gpu] -= needs[name]
            if process.returncode == 0:
                open(os.path.join(runs, f"{name}.done"), "w").close()
            print(
                f"{name}: "
                f"{'done' if process.returncode == 0 else f'failed ({process.returncode}): see {name}.log'}",
                flush=True)


def keep(run_dirs, into=KEPT):
    """A run's config.yaml, compacted metrics.jsonl (what the figures draw, plus the update's trained tokens
    and the GPU memory's peak, which need_gib reads), thoughts.json and answers.json (from the records of
    samples.jsonl) into INTO/NAME. The records are read first: a run without them leaves nothing half kept. A
    kept run of the same name is never replaced."""
    for run_dir in run_dirs:
        thoughts, answers = thoughts_of(run_dir), records_of(run_dir, "actions") or {}
        target = os.path.join(into, os.path.basename(os.path.normpath(run_dir)))
        if os.path.exists(target):
            raise SystemExit(f"error: {target} holds a kept run already, and --keep never replaces one: move it "
                             f"elsewhere first (e.g. into {into}-earlier/), then keep {run_dir} again")
        os.makedirs(target)
        shutil.copy(os.path.join(run_dir, "config.yaml"), target)
        with open(os.path.join(target, "metrics.jsonl"), "w") as f:
            for row in plots.read_metrics(run_dir):
                compact = {**compact_row(row), **{k: rounded(row[k]) for k in (TOKENS_KEY, PEAK_KEY) if k in row}}
                f.write(json.dumps(compact, separators=(",", ":")) + "\n")
        for name, records in (("thoughts.json", thoughts), ("answers.json", answers)):
            with open(os.path.join(target, name), "w") as f:  # ensure_ascii: any thought is ASCII
                json.dump(records, f, indent=0, ensure_ascii=True)
        print(f"kept {run_dir} in {target}")


def draw(number, runs, into="."):
    """Figure to INTO/plots/findingN.png, tables to INTO/results/findings/findingN.md (INTO: the repository, as
    main() works there); returns the tables. With none of the finding's runs in RUNS, it writes nothing: an
    empty figure would take the place of a drawn one."""
    if not any(has_results(folder(runs, name)) for name in FINDINGS[number][1]):
        raise SystemExit(f"error: none of Finding {number}'s runs has results in {runs}: nothing drawn; give "
                         "--runs the folder that holds them (the kept runs: results/runs/findings)")
    table, fig = FINDINGS[number][2](runs)
    fig.tight_layout()
    os.makedirs(os.path.join(into, "plots"), exist_ok=True)
    fig.savefig(os.path.join(into, "plots", f"finding{number}.png"), dpi=80)
    plots.plt.close(fig)
    os.makedirs(os.path.join(into, "results", "findings"), exist_ok=True)
    with open(os.path.join(into, "results", "findings", f"finding{number}.md"), "w") as f:
        f.write(f"Finding {number}: {FINDINGS[number][0]} (drawn from {os.path.relpath(runs)})\n\n{table}\n")
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("finding", nargs="?", choices=[*sorted(FINDINGS), "all"],
                        help="the finding's number, or all: the whole protocol")
    parser.add_argument("--runs", default="runs/findings",
                        help="the folder of the run folders (default runs/findings)")
    parser.add_argument("--parallel", default="auto",
                        help="runs at once, on every visible GPU together: a number, or auto (the default): as "
                             "many as the GPUs' free memory holds, each run counted at its arm's measured peak")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="config overrides for every run, after the budget (e.g. train.iterations=40)")
    parser.add_argument("--draw", action="store_true",
                        help="only draw the figure and tables from the runs there")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the runs it would start, their commands and order; start nothing")
    parser.add_argument("--keep", nargs="+", metavar="RUN_DIR",
                        help="keep these runs in results/runs/findings")
    args = parser.parse_args(argv)
    runs, kept = os.path.abspath(args.runs), [os.path.abspath(run_dir) for run_dir in args.keep or []]
    os.chdir(os.path.dirname(os.path.abspath(__file__)))  # presets and ragen_mini.py are found from here
    if kept:
        kept = [d for d in kept if os.path.isdir(d)]  # a glob over RUNS also names its NAME.log and NAME.done
        not_runs = [d for d in kept if not os.path.exists(os.path.join(d, "metrics.jsonl"))]
        if not kept or not_runs:
            parser.error(f"--keep: no metrics.jsonl in {', '.join(not_runs) or 'any folder named'}: "
                         "give run folders")
        return keep(kept)
    if args.finding is None:
        for number, (claim, names, _) in FINDINGS.items():
            have = [n for n in names if has_results(folder(runs, n))]
            print(f"Finding {number}: {claim}\n  runs ({len(have)} of {len(names)} with results in "
                  f"{args.runs}): {', '.join(names)}")
        return None
    if args.parallel != "auto" and not (args.parallel.isdigit() and int(args.parallel) >= 1):
        parser.error(f"--parallel {args.parallel}: give a number of runs, at least 1, or auto")
    if os.path.exists(runs) and not os.path.isdir(runs):
        parser.error(f"--runs {runs} is a file: give the folder of the run folders")
    numbers = sorted(FINDINGS) if args.finding == "all" else [args.finding]
    if not args.draw:
        names = list(RUNS) if args.finding == "all" else FINDINGS[args.finding][1]
        run_all(names, runs, args.parallel, args.set, args.dry_run, free_gpu_gib())
        if args.dry_run:
            return None
    tables = [draw(number, runs) for number in numbers]
    for table in tables:
        print(table)
    return tables[0] if len(tables) == 1 else tables


if __name__ == "__main__":
    main()
