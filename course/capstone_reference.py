"""The capstone's reference runs (part b): for each question of course/capstone-investigation.md that the tiny
model can answer on a CPU, its settings on the Bandit preset, three seeds each, then a table of what the report
measures (with each setting's range over the seeds) and a figure with every seed drawn.

    python course/capstone_reference.py filter            # runs what is not done yet, then the table and figure
    python course/capstone_reference.py all --jobs 2      # every question; two runs at a time (one thread each)
    python course/capstone_reference.py filter --draw     # the table and figure of the runs there, runs nothing

Runs go to runs/capstone/SETTING-seedS (a setting shared by two questions runs once), each folder marked as this
script's (MARK): a run is done when its metrics.jsonl holds the last evaluation, and only a marked folder is
started over. A folder there without the mark (a run of your own) stops the script before it runs or draws
anything. Each run records its CPU minutes in RUN/cpu_minutes. The table goes to
results/capstone/QUESTION.md, the figure to plots/capstone_QUESTION.png.

What is measured, from each run's evaluations (eval.every=5: 11 of them, 128 episodes each):
  mean success   the mean of eval/success over iterations 0-50: how fast and how far it learned, in one number
  first >= 0.9   the first evaluated iteration with eval/success >= 0.9 (None: never): how fast
  final success  eval/success at iteration 50: where it ended (on the Bandit every setting ends near 1.0)
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import plots  # noqa: E402

PRESET = "configs/bandit.yaml"
# 50 iterations: every setting has learned the Bandit by then (0.95 and more), so what differs is how fast;
# evaluations every 5 iterations on 128 seeds (sd of a success near 0.9: 0.027) show it. One thread a run: its
# CPU time then counts its work (two threads on two busy cores spin while they wait for each other, and the
# automatic count, models.cpu_threads, depends on the load when the run starts)
ITERATIONS = 50
COMMON = ["train.device=cpu", "train.threads=1", f"train.iterations={ITERATIONS}", "eval.every=5",
          "eval.num_seeds=128", "checkpoint.every=0"]
SEEDS = (0, 1, 2)
# setting name -> its overrides of the preset; the preset itself is filter 0.25, PPO with GAE, clip 0.2/0.28,
# 8 prompts x 8 samples, mini-batches of 16 (the 2 kept groups: one optimiser step an iteration)
SETTINGS = {
    "preset": [],
    "filter0.5": ["algo.filter_ratio=0.5"],  # 4 groups kept: 32 trajectories, 2 optimiser steps
    "filter1.0": ["algo.filter_ratio=1.0"],  # all 8: 64 trajectories, 4 optimiser steps
    "filter1.0-minibatch64": ["algo.filter_ratio=1.0", "algo.mini_batch_size=64", "algo.micro_batch_size=64"],
    "grpo": ["algo.estimator=grpo"],
    "clip0.2": ["algo.clip_high=0.2"],  # one optimiser step an iteration: the ratio is 1, no clip acts
    "epochs4": ["algo.ppo_epochs=4"],  # four passes over the kept trajectories: the policy moves, a clip can act
    "epochs4-clip0.2": ["algo.ppo_epochs=4", "algo.clip_high=0.2"],
    "n4": ["rollout.groups=16", "rollout.group_size=4"],  # 64 trajectories either way; 16 x 0.25 = 4 groups
    "n16": ["rollout.groups=4", "rollout.group_size=16"],  # of 4, or 1 group of 16: 16 trained each
}
QUESTIONS = {  # question -> its settings, the preset's own first
    "filter": ["preset", "filter0.5", "filter1.0", "filter1.0-minibatch64"],
    "critic": ["preset", "grpo"],
    "clip": ["preset", "clip0.2", "epochs4", "epochs4-clip0.2"],
    "group-size": ["n4", "preset", "n16"],
}
RUNS_DIR = os.path.join(ROOT, "runs", "capstone")
MARK = ".capstone-run"  # in each run folder this script starts: the only folders it starts over


def run_dir(setting, seed):
    return os.path.join(RUNS_DIR, f"{setting}-seed{seed}")


def evaluations(path):
    """[(iteration, eval/success)] of a run folder's metrics.jsonl, in order ([] without one)."""
    if not os.path.exists(os.path.join(path, "metrics.jsonl")):
        return []
    return [(row["iteration"], row["eval/success"]) for row in plots.read_metrics(path) if "eval/success" in row]


def done(path):
    points = evaluations(path)
    return bool(points) and points[-1][0] == ITERATIONS


def train(setting, seed):
    """One run (COMMON gives it one thread); -> its CPU minutes."""
    path = run_dir(setting, seed)
    command = [sys.executable, "ragen_mini.py", "--config", PRESET, *COMMON, *SETTINGS[setting], f"seed={seed}",
               f"run_dir={path}", "overwrite=true"]
    os.makedirs(path, exist_ok=True)
    open(os.path.join(path, MARK), "w").close()
    started = time.time()
    with open(path + ".log", "w") as log:
        child = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    if status != 0 or not done(path):
        raise SystemExit(f"error: {' '.join(command[1:])} failed (exit code {os.waitstatus_to_exitcode(status)}); "
                         f"its log: {path}.log")
    cpu_minutes = (usage.ru_utime + usage.ru_stime) / 60
    with open(os.path.join(path, "cpu_minutes"), "w") as f:
        f.write(f"{cpu_minutes:.2f}\n")
    print(f"{setting} seed {seed}: {cpu_minutes:.1f} CPU min, {(time.time() - started) / 60:.1f} min", flush=True)
    return cpu_minutes


def measures(points):
    """What the report measures of one run's [(iteration, success)].
    >>> measures([(0, 0.5), (5, 0.8), (10, 0.95), (15, 0.9)])
    {'mean success': 0.7875, 'first >= 0.9': 10, 'final success': 0.9}"""
    first = next((iteration for iteration, success in points if success >= 0.9), None)
    return {"mean success": sum(s for _, s in points) / len(points), "first >= 0.9": first,
            "final success": points[-1][1]}


def spread(values):
    """'mean +- sd (min-max)' of the seeds' values; a seed that never got there is counted as such."""
    reached = [v for v in values if v is not None]
    missing = len(values) - len(reached)
    if not reached:
        return "never"
    text = (f"{statistics.mean(reached):.3g} +- {statistics.stdev(reached):.2g} ({min(reached):.3g}-{max(reached):.3g})"
            if len(reached) > 1 else f"{reached[0]:.3g}")
    return text + (f", {missing} never" if missing else "")


def table(question):
    """The question's Markdown table: one row per setting, each measure's spread over the seeds, CPU minutes;
    then the CPU minutes of all its runs."""
    lines = [f"| setting ({len(SEEDS)} seeds) | overrides | mean success | first >= 0.9 | final success "
             "| CPU min a run |", "| --- | --- | --- | --- | --- | --- |"]
    total = 0.0
    for setting in QUESTIONS[question]:
        runs = [measures(evaluations(run_dir(setting, seed))) for seed in SEEDS]
        cpu = [float(open(os.path.join(run_dir(setting, seed), "cpu_minutes")).read()) for seed in SEEDS]
        lines.append(f"| {setting} | {' '.join(SETTINGS[setting]) or '(the preset)'} | "
                     + " | ".join(spread([run[key] for run in runs]) for key in runs[0])
                     + f" | {min(cpu):.1f}-{max(cpu):.1f} |")
        total += sum(cpu)
    return "\n".join(lines) + f"\n\nAll {len(QUESTIONS[question]) * len(SEEDS)} runs: {total:.0f} CPU minutes."


def figure(question, path):
    """Evaluation success against the iteration: every seed drawn, one colour per setting."""
    fig, ax = plots.plt.subplots(figsize=(7, 4))
    for k, setting in enumerate(QUESTIONS[question]):
        for seed in SEEDS:
            points = evaluations(run_dir(setting, seed))
            ax.plot(*zip(*points), color=f"C{k}", alpha=0.8, label=setting if seed == SEEDS[0] else None)
    ax.set(xlabel="iteration", ylabel="evaluation success",
           title=f"Bandit, tiny model: {question} ({len(SEEDS)} seeds)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plots.plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("question", choices=[*QUESTIONS, "all"])
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (each one thread)")
    parser.add_argument("--draw", action="store_true", help="the table and figure only; run nothing")
    args = parser.parse_args(argv)
    questions = list(QUESTIONS) if args.question == "all" else [args.question]
    needed = [run_dir(setting, seed) for question in questions for setting in QUESTIONS[question] for seed in SEEDS]
    foreign = [path for path in needed if os.path.lexists(path) and not os.path.isfile(os.path.join(path, MARK))]
    if foreign:
        raise SystemExit(f"error: {foreign[0]} was not made by this script (no {MARK} in it): it is neither "
                         f"a reference run nor started over; move it elsewhere ({len(foreign)} such folders)")
    todo = list(dict.fromkeys((setting, seed) for question in questions for setting in QUESTIONS[question]
                              for seed in SEEDS if not done(run_dir(setting, seed))))
    if todo and args.draw:
        raise SystemExit(f"error: --draw: {len(todo)} runs are not done, e.g. {run_dir(*todo[0])}; "
                         f"run without --draw to train them")
    os.makedirs(RUNS_DIR, exist_ok=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda job: train(*job), todo))
    os.makedirs(os.path.join(ROOT, "results", "capstone"), exist_ok=True)
    for question in questions:
        text = table(question)
        with open(os.path.join(ROOT, "results", "capstone", f"{question}.md"), "w") as f:
            f.write(f"# Capstone reference runs: {question}\n\n`python course/capstone_reference.py {question}`; "
                    f"preset {PRESET} with {' '.join(COMMON)}\n\n{text}\n")
        figure(question, os.path.join(ROOT, "plots", f"capstone_{question}.png"))
        print(f"\n{question}\n{text}")


if __name__ == "__main__":
    main()
