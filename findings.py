"""The paper's seven findings, one command each: run what a finding needs with SmolLM2 and reasoning on, then
draw its figure and table from the run folders (docs/findings.md holds the verdicts).

    python findings.py                         # the findings, their runs, and which are done
    python findings.py 1                       # run Finding 1's runs (several at once on one GPU), then draw
    python findings.py 1 --parallel 3          # how many runs share the GPU (default 2, for an 80 GB card)
    python findings.py 1 --draw --runs results/runs/findings   # draw only, from the kept runs

Runs go to RUNS_DIR/NAME (default runs/findings), one log beside each; a run that ended normally is marked
done (NAME.done) and is not run again. Each folder a run starts in carries the mark NAME/.findings-run, and
only such a folder, not done, is removed (to start its run again). A run folder there with neither mark (kept
runs, a run of your own) makes the run mode refuse, so results/runs/findings is only read (--draw). The
figure goes to plots/findingN.png, the table to results/findings/findingN.md (and the screen); --draw with
none of the finding's runs there is refused and writes nothing. Findings 1, 4 and 5 share the Sokoban runs;
Finding 3 reads them; Finding 2 reads the thoughts of each run's evaluation records (samples.jsonl: the same
evaluation seeds each time), kept as thoughts.json by --keep:

    # config, compacted metrics and thoughts into results/runs/findings
    python findings.py --keep runs/findings/*
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import plots
import viewer
from tools.compact_metrics import compact_file

SOKOBAN, BANDIT, FROZENLAKE = ("configs/smollm2.yaml", "configs/smollm2-bandit.yaml",
                               "configs/smollm2-frozenlake.yaml")
# The same budget for every run: 40 iterations, so that methods are compared at one iteration count, and at
# most 28 minutes (a run that hits the limit evaluates and stops; vanilla PPO, the slowest, needs about 16
# minutes for 40 iterations with two runs to a card, after a 4-5 minute warm-up). Micro-batches of 16,384
# tokens hold a run's memory down (the sums are the same at any micro-batch size). Two runs share an 80 GB
# card; three ran out of memory there (StarPO-S and GRPO reserved 27.9 GiB each, vanilla PPO, with its
# reference model, failed), so --parallel 3 wants a larger card. A run with no step done in 10 minutes (the
# longest step, the first iteration's compilation, takes about 2) ends with its stacks in its log.
BUDGET = ["train.iterations=40", "train.time_limit_min=28", "checkpoint.every=0",
          "algo.micro_batch_tokens=16384", "train.stall_min=10"]
# StarPO: no filter, a KL, clip 0.2
VANILLA = ["algo.filter_ratio=1.0", "algo.kl_coef=0.001", "algo.clip_high=0.2"]
SEEDS = (0, 1, 2)

RUNS = {  # name -> (preset, overrides)
    **{f"sokoban-starpo-s-seed{s}": (SOKOBAN, [f"seed={s}"]) for s in SEEDS},
    **{f"sokoban-ppo-seed{s}": (SOKOBAN, [f"seed={s}", *VANILLA]) for s in SEEDS},
    **{f"sokoban-grpo-seed{s}": (SOKOBAN, [f"seed={s}", "algo.estimator=grpo", *VANILLA]) for s in SEEDS},
    "sokoban-ppo-filter0.25": (SOKOBAN, ["seed=0", *VANILLA, "algo.filter_ratio=0.25"]),
    "sokoban-ppo-filter0.5": (SOKOBAN, ["seed=0", *VANILLA, "algo.filter_ratio=0.5"]),
    "sokoban-starpo-s-with-kl": (SOKOBAN, ["seed=0", "algo.kl_coef=0.001"]),
    "sokoban-starpo-s-no-clip-higher": (SOKOBAN, ["seed=0", "algo.clip_high=0.2"]),
    "sokoban-n4": (SOKOBAN, ["seed=0", "rollout.groups=64", "rollout.group_size=4"]),
    "sokoban-n16": (SOKOBAN, ["seed=0", "rollout.groups=16", "rollout.group_size=16"]),
    "sokoban-5-actions-per-turn": (SOKOBAN, ["seed=0", "env.max_turns=5", "env.max_actions_per_turn=5"]),
    **{f"sokoban-no-think-seed{s}": (SOKOBAN, [f"seed={s}", "rollout.think=false"]) for s in SEEDS},
    "bandit-starpo-s-seed0": (BANDIT, ["seed=0"]),
    "bandit-no-think": (BANDIT, ["seed=0", "rollout.think=false"]),
    "frozenlake-starpo-s-seed0": (FROZENLAKE, ["seed=0"]),
}
METHODS = {"StarPO-S": "sokoban-starpo-s-seed", "vanilla StarPO (PPO)": "sokoban-ppo-seed",
           "vanilla StarPO (GRPO)": "sokoban-grpo-seed"}
SEEDED = [f"{prefix}{s}" for prefix in METHODS.values() for s in SEEDS]


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


def has_results(run_dir):
    """Its metrics end with an evaluation after iteration 0 (what the figures and tables need)."""
    rows = read(run_dir)
    return bool(rows) and rows[-1]["iteration"] > 0 and "eval/success" in rows[-1]


def summary_row(rows):
    """-> dict: iterations run, eval success at iteration 0, the last and the best (with its iteration)."""
    points = evals(rows)
    best = max(points, key=lambda p: p[1])
    return {"iterations": rows[-1]["iteration"], "start": points[0][1], "end": points[-1][1], "best": best[1],
            "best_at": best[0]}


def mean_sd(values):
    return (statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0)


def fmt(values):
    """'0.312 +- 0.021 (n=3)', or the one value."""
    mean, sd = mean_sd(values)
    return f"{mean:.3f} ± {sd:.3f} (n={len(values)})" if len(values) > 1 else f"{mean:.3f} (n=1)"


# ======================================================================================================
# The findings: each draw function returns (markdown table, figure) from the run folders under `runs`
# ======================================================================================================
def nearest_eval(rows, iteration):
    """Eval success at the evaluation nearest ITERATION (the earlier of two as near)."""
    return min(evals(rows), key=lambda p: (abs(p[0] - iteration), p[0]))[1]


def draw_groups(runs, groups, title, think_panel=False):
    """Eval success over iterations for groups of runs (a method's seeds, or one run): the mean over a group's
    seeds with their range (min to max) shaded, and a table row each with mean ± std over seeds. Runs of
    unequal length are also compared at one iteration, the end of the shortest: each run's evaluation nearest
    it. With think_panel, the groups' median think tokens per turn (mean over seeds) in a second panel and
    column."""
    fig, axes = plots.plt.subplots(1, 2 if think_panel else 1, figsize=(14 if think_panel else 8, 5),
                                   squeeze=False)
    read_groups = [(label, [(m, rows) for m in members
                            if (rows := read(os.path.join(runs, m))) and evals(rows)])
                   for label, members in groups]
    ends = [evals(rows)[-1][0] for _, found in read_groups for _, rows in found]
    shared = min(ends) if ends else 0
    think_head = " think tokens per turn, median: first / last iteration |" if think_panel else ""
    lines = [f"| runs | seeds | iterations | eval success at 0 | at the end | at iteration ≈{shared} | "
             f"best |{think_head}",
             "| --- | --- | --- | --- | --- | --- | --- |" + " --- |" * think_panel]
    for color, (label, found) in enumerate(read_groups):
        if not found:
            lines.append(f"| {label} | not run yet | | | | | |" + " |" * think_panel)
            continue
        rows_of = [rows for _, rows in found]
        stats = [summary_row(rows) for rows in rows_of]
        # the shortest seed's evaluation iterations, where every seed has one within 2 (a run stopped by its
        # time limit evaluates at its last iteration, not on the eval.every grid)
        grid = [i for i, _ in min((evals(rows) for rows in rows_of), key=len)]
        common = [i for i in grid if all(min(abs(j - i) for j, _ in evals(rows)) <= 2 for rows in rows_of)]
        by_iteration = [[nearest_eval(rows, i) for rows in rows_of] for i in common]
        axes[0, 0].plot(common, [statistics.mean(v) for v in by_iteration], color=f"C{color}", marker="o",
                        markersize=3, label=f"{label} ({len(found)} seed{'s' * (len(found) > 1)})")
        if len(found) > 1:
            axes[0, 0].fill_between(common, [min(v) for v in by_iteration], [max(v) for v in by_iteration],
                                    color=f"C{color}", alpha=0.2)
        line = (f"| {label} | {', '.join(m.rsplit('seed', 1)[-1] if 'seed' in m else '0' for m, _ in found)} "
                f"| {', '.join(str(s['iterations']) for s in stats)} | {fmt([s['start'] for s in stats])} | "
                f"{fmt([s['end'] for s in stats])} | "
                f"{fmt([nearest_eval(rows, shared) for rows in rows_of])} | "
                f"{fmt([s['best'] for s in stats])} |")
        if think_panel:
            thinks = [series(rows, "rollout/think_tokens_median") for rows in rows_of]
            common = sorted(set.intersection(*(set(i for i, _ in think) for think in thinks)))
            mean = [statistics.mean(dict(think)[i] for think in thinks) for i in common]
            axes[0, 1].plot(common, mean, color=f"C{color}", label=label)
            line += f" {mean[0]:.1f} / {mean[-1]:.1f} |"
        lines.append(line)
    axes[0, 0].set(xlabel="iteration", ylabel="eval success (256 held-out seeds)", title=title)
    if think_panel:
        axes[0, 1].set(xlabel="iteration", ylabel="think tokens per turn (median; mean over seeds)",
                       title="Reasoning length over training")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return "\n".join(lines), fig


def draw_algorithms(runs, names=None):
    """Findings 1, 4, 5: the three methods over their seeds, and one line for each single-seed ablation."""
    groups = [(label, [f"{prefix}{s}" for s in SEEDS]) for label, prefix in METHODS.items()]
    return draw_groups(runs, groups + [(name, [name]) for name in names or []],
                       "Sokoban, SmolLM2-135M, reasoning on")


def draw_finding1(runs):
    return draw_algorithms(runs)


def draw_finding4(runs):
    return draw_algorithms(runs, ["sokoban-ppo-filter0.25", "sokoban-ppo-filter0.5"])


def draw_finding5(runs):
    return draw_algorithms(runs, ["sokoban-starpo-s-with-kl", "sokoban-starpo-s-no-clip-higher"])


def thoughts_of(run_dir):
    """{evaluation title: {seed (as a string): [the thought of each turn]}}: RUN_DIR/thoughts.json (kept
    runs), else the records of RUN_DIR/samples.jsonl (their title, seed and each turn's think; a damaged line
    is left out and said). SystemExit when the run has neither."""
    kept = os.path.join(run_dir, "thoughts.json")
    if os.path.exists(kept):
        with open(kept) as f:
            return json.load(f)
    path = os.path.join(run_dir, "samples.jsonl")
    if not os.path.isfile(path):
        raise SystemExit(f"error: {run_dir} has no samples.jsonl (nor thoughts.json): no thoughts to read. A "
                         "run of an older ragen-mini wrote samples.md, which is no longer read")
    records, skipped = viewer.read_samples(path)
    for note in skipped:
        print(f"skipped: {note}", file=sys.stderr)
    out = {}
    for record in records:
        out.setdefault(record["title"], {})[str(record["seed"])] = [turn["think"] for turn in record["turns"]]
    return out


def draw_finding2(runs):
    """The Echo Trap: the first-turn thought of the same evaluation seeds at iteration 0 and at the end (the
    paper's Table 1), and the collapse measures over training."""
    fig, axes = plots.plt.subplots(1, 3, figsize=(15, 4))
    lines = ["| env | seed | iteration 0 | the end |", "| --- | --- | --- | --- |"]
    for color, name in enumerate(["bandit-starpo-s-seed0", "sokoban-starpo-s-seed0"]):
        run_dir, rows = os.path.join(runs, name), read(os.path.join(runs, name))
        if not rows:
            lines.append(f"| {name} | not run yet | | |")
            continue
        thoughts = thoughts_of(run_dir)
        last = [t for t in thoughts if t.startswith("Evaluation at iteration")][-1]
        first = thoughts.get("Evaluation at iteration 0", {})
        for seed, turns in list(first.items())[:4]:
            end = thoughts[last].get(seed, [""])
            lines.append(f"| {name.split('-')[0]} | {seed} | {quote(turns[0] if turns else '')} | "
                         f"{quote(end[0] if end else '')} ({last.split()[-1]}) |")
        for ax, key in zip(axes, ["rollout/think_tokens_median", "rollout/distinct_thoughts",
                                  "rollout/thought_mi"]):
            xs, ys = zip(*series(rows, key)) if series(rows, key) else ((), ())
            ax.plot(xs, ys, color=f"C{color}", label=name)
            ax.set(xlabel="iteration", title=key)
            ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    return "\n".join(lines), fig


def quote(text):
    return "“" + text.replace("|", "\\|")[:120] + "”"


def falls(points, start=10, share=0.5, window=5):
    """The first iteration at which the moving mean (over `window` iterations) of a metric is below `share` of
    its mean over the first `start` iterations, or None."""
    values = [v for _, v in points]
    if len(values) < start + window:
        return None
    base = statistics.mean(values[:start])
    for k in range(start, len(values) - window + 1):
        if statistics.mean(values[k:k + window]) < share * base:
            return points[k + window - 1][0]
    return None


def draw_finding3(runs):
    """Collapse indicators: for each run, its best evaluation and whether success falls after it (by more than
    0.05, about two standard errors at 256 seeds); when in-group reward std and entropy fall below half their
    first-10-iteration level (5-iteration moving mean)."""
    lines = ["| run | best eval (iteration) | end | success falls after the best? | reward std halves at | "
             "entropy halves at |", "| --- | --- | --- | --- | --- | --- |"]
    fig, axes = plots.plt.subplots(1, 3, figsize=(15, 4))
    for color, name in enumerate(n for n in RUNS if n.startswith("sokoban")):
        rows = read(os.path.join(runs, name))
        if not rows or not evals(rows):
            continue
        s = summary_row(rows)
        collapsed = s["end"] < s["best"] - 0.05
        std_at, ent_at = (falls(series(rows, key)) if series(rows, key) else f"no {key} logged"
                          for key in ("rollout/group_reward_std_all", "train/entropy"))
        lines.append(f"| {name} | {s['best']:.3f} ({s['best_at']}) | {s['end']:.3f} | "
                     f"{'yes' if collapsed else 'no'} | {std_at or 'never'} | {ent_at or 'never'} |")
        for ax, key in zip(axes, ["eval/success", "rollout/group_reward_std_all", "train/entropy"]):
            points = series(rows, key)
            if not points:  # a run logged before the metric existed, or a damaged file: left out, said so
                print(f"note: {name} has no {key} in its metrics.jsonl: not in that panel")
                continue
            xs, ys = zip(*points)
            ax.plot(xs, ys, color=f"C{color % 10}", label=name,
                    marker="o" if key.startswith("eval") else None, markersize=2)
            ax.set(xlabel="iteration", title=key)
            ax.grid(alpha=0.3)
    axes[0].legend(fontsize=6)
    return "\n".join(lines), fig


def draw_finding6(runs):
    names = ["sokoban-n4", "sokoban-n16", "sokoban-starpo-s-seed0", "sokoban-5-actions-per-turn"]
    return draw_groups(runs, [(name, [name]) for name in names],
                       "Rollout quality: responses per prompt, actions per turn", think_panel=True)


def draw_finding7(runs):
    """Reasoning: on against off on Sokoban over three seeds (reasoning on is StarPO-S), and on the Bandit;
    think length over training on all three envs."""
    groups = [("Sokoban, reasoning on", [f"sokoban-starpo-s-seed{s}" for s in SEEDS]),
              ("Sokoban, reasoning off", [f"sokoban-no-think-seed{s}" for s in SEEDS]),
              ("Bandit, reasoning on", ["bandit-starpo-s-seed0"]),
              ("Bandit, reasoning off", ["bandit-no-think"]),
              ("FrozenLake, reasoning on", ["frozenlake-starpo-s-seed0"])]
    return draw_groups(runs, groups, "Reasoning on and off", think_panel=True)


FINDINGS = {  # number -> (the paper's claim, in short; the runs it needs; its drawing)
    "1": ("multi-turn RL is unstable; PPO (critic) more stable than GRPO", SEEDED, draw_finding1),
    "2": ("the Echo Trap: reasoning collapses to repeated templates",
          ["bandit-starpo-s-seed0", "sokoban-starpo-s-seed0"], draw_finding2),
    "3": ("reward std and entropy fall before success collapses", SEEDED, draw_finding3),
    "4": ("uncertainty filtering improves stability",
          SEEDED + ["sokoban-ppo-filter0.25", "sokoban-ppo-filter0.5"], draw_finding4),
    "5": ("KL removal and clip-higher improve peak success",
          SEEDED + ["sokoban-starpo-s-with-kl", "sokoban-starpo-s-no-clip-higher"], draw_finding5),
    "6": ("rollout quality: fewer responses per prompt, a few actions per turn",
          ["sokoban-n4", "sokoban-n16", "sokoban-starpo-s-seed0", "sokoban-5-actions-per-turn"],
          draw_finding6),
    "7": ("reasoning shrinks over training and helps little without fine-grained rewards",
          ["bandit-starpo-s-seed0", "bandit-no-think",
           *(f"sokoban-{kind}-seed{s}" for kind in ("starpo-s", "no-think") for s in SEEDS),
           "frozenlake-starpo-s-seed0"], draw_finding7),
}


# ======================================================================================================
# Running and keeping
# ======================================================================================================
def command(name, run_dir, extra=()):
    """EXTRA (--set) comes last, so it wins over the budget and the run's own overrides."""
    preset, overrides = RUNS[name]
    return [sys.executable, "ragen_mini.py", "--config", preset, *BUDGET, *overrides, *extra,
            f"run_dir={run_dir}"]


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


def run_all(names, runs, parallel, extra=()):
    """Run the runs not done yet, `parallel` at a time, each logging to RUNS/NAME.log; RUNS/NAME.done marks
    one that ended normally. Refuses, starting nothing, when RUNS holds a folder it did not make."""
    todo = [n for n in names if not done(os.path.join(runs, n))]
    if found := not_ours(runs, todo):
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise SystemExit(f"error: {found[0]}{more} is not a run findings.py started (no {MARK}: kept runs, "
                         "or one of yours), and it never removes or runs beside one: nothing started; choose "
                         "another --runs (default runs/findings) or move the folder away")
    os.makedirs(runs, exist_ok=True)
    running = []
    while todo or running:
        while todo and len(running) < parallel:
            name = todo.pop(0)
            run_dir = os.path.join(runs, name)
            if own(run_dir):
                shutil.rmtree(run_dir)  # a run of ours cut short starts again
            os.makedirs(run_dir)
            open(os.path.join(run_dir, MARK), "w").close()  # first: if the run is cut short, ours to remove
            with open(os.path.join(runs, f"{name}.log"), "w") as log:
                running.append((name, subprocess.Popen(command(name, run_dir, extra),
                                                       stdout=log, stderr=subprocess.STDOUT)))
            print(f"started {name}: {' '.join(command(name, run_dir, extra)[1:])}", flush=True)
        time.sleep(5)
        for name, process in [r for r in running if r[1].poll() is not None]:
            running.remove((name, process))
            if process.returncode == 0:
                open(os.path.join(runs, f"{name}.done"), "w").close()
            print(
                f"{name}: "
                f"{'done' if process.returncode == 0 else f'failed ({process.returncode}): see {name}.log'}",
                flush=True)


def keep(run_dirs, into="results/runs/findings"):
    """A run's config.yaml, compacted metrics.jsonl and thoughts.json (thoughts_of: from the records of
    samples.jsonl) into INTO/NAME. The thoughts are read first: a run without them leaves nothing half
    kept."""
    for run_dir in run_dirs:
        thoughts = thoughts_of(run_dir)
        target = os.path.join(into, os.path.basename(os.path.normpath(run_dir)))
        os.makedirs(target, exist_ok=True)
        shutil.copy(os.path.join(run_dir, "config.yaml"), target)
        shutil.copy(os.path.join(run_dir, "metrics.jsonl"), target)
        compact_file(os.path.join(target, "metrics.jsonl"))
        with open(os.path.join(target, "thoughts.json"), "w") as f:  # ensure_ascii: any thought is ASCII
            json.dump(thoughts, f, indent=0, ensure_ascii=True)
        print(f"kept {run_dir} in {target}")


def draw(number, runs, into="."):
    """Figure to INTO/plots/findingN.png, table to INTO/results/findings/findingN.md (INTO: the repository, as
    main() works there); returns the table. With none of the finding's runs in RUNS, it writes nothing: an
    empty figure would take the place of a drawn one."""
    if not any(has_results(os.path.join(runs, name)) for name in FINDINGS[number][1]):
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
    parser.add_argument("finding", nargs="?", choices=sorted(FINDINGS), help="the finding's number")
    parser.add_argument("--runs", default="runs/findings",
                        help="the folder of the run folders (default runs/findings)")
    parser.add_argument("--parallel", type=int, default=2,
                        help="runs at once on the GPU (default 2, for 80 GB)")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="config overrides for every run, after the budget (e.g. train.time_limit_min=8)")
    parser.add_argument("--draw", action="store_true",
                        help="only draw the figure and table from the runs there")
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
            have = [n for n in names if has_results(os.path.join(runs, n))]
            print(f"Finding {number}: {claim}\n  runs ({len(have)} of {len(names)} with results in "
                  f"{args.runs}): {', '.join(names)}")
        return None
    if args.parallel < 1:
        parser.error("--parallel must be at least 1")
    if os.path.exists(runs) and not os.path.isdir(runs):
        parser.error(f"--runs {runs} is a file: give the folder of the run folders")
    if not args.draw:
        run_all(FINDINGS[args.finding][1], runs, args.parallel, args.set)
    table = draw(args.finding, runs)
    print(table)
    return table


if __name__ == "__main__":
    main()
