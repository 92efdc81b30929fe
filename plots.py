"""Plots of a run's metrics.jsonl: the paper's collapse indicators on one page (its Figures 6 and 9).

    python plots.py RUN_DIR [RUN_DIR ...]    # one line per run: compare StarPO with StarPO-S

How to read them: a healthy run raises success while entropy, reward std and the in-group reward std
come down slowly. The echo trap (paper section 4) shows as entropy and in-group reward std falling to
~0 BEFORE success drops, the distinct-response fraction falling towards 1/N (all N samples of a prompt
say the same thing), and a spike of the gradient norm at the collapse.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display on training machines
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [  # (title, metric names drawn in that panel)
    ("success", ["rollout/success", "eval/success"]),
    ("reward mean", ["rollout/reward_mean"]),
    ("reward std", ["rollout/reward_std"]),
    ("in-group reward std", ["rollout/group_reward_std_all", "rollout/group_reward_std_kept"]),
    ("token entropy", ["train/entropy"]),
    ("gradient norm", ["train/grad_norm"]),
    ("tokens per trajectory", ["rollout/response_tokens", "rollout/think_tokens"]),
    ("valid-action fraction", ["rollout/valid_action_frac"]),
    ("distinct responses in a group", ["rollout/distinct_response_frac"]),
]


def read_metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def plot_runs(run_dirs, path, labels=None):
    """One page of panels; each run is one colour, each metric of a panel one line style."""
    fig, axes = plt.subplots(3, 3, figsize=(15, 11))
    for run_index, run_dir in enumerate(run_dirs):
        rows = read_metrics(run_dir)
        label = labels[run_index] if labels else os.path.basename(os.path.normpath(run_dir))
        for ax, (title, names) in zip(axes.flat, PANELS):
            for style, name in zip(["-", "--", ":"], names):
                points = [(r["iteration"], r[name]) for r in rows if name in r]
                if points:
                    xs, ys = zip(*points)
                    ax.plot(xs, ys, style, color=f"C{run_index}", marker="o" if name.startswith("eval/") else None,
                            markersize=3, label=f"{label}: {name.split('/')[1]}")
            ax.set_title(title)
            ax.set_xlabel("iteration")
            ax.grid(alpha=0.3)
    for ax in axes.flat:
        if ax.lines:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_run(run_dir):
    """Refresh RUN_DIR/plots.png (the trainer calls it every 10 iterations)."""
    plot_runs([run_dir], os.path.join(run_dir, "plots.png"))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: python plots.py RUN_DIR [RUN_DIR ...] [--out FILE.png]")
    args = sys.argv[1:]
    out = args[args.index("--out") + 1] if "--out" in args else "plots.png"
    runs = [a for i, a in enumerate(args) if a != "--out" and (i == 0 or args[i - 1] != "--out")]
    plot_runs(runs, out)
    print(f"wrote {out}")
