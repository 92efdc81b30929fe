"""Plots of a run's metrics.jsonl: the paper's collapse indicators on one page (its Figures 6 and 9).

    python plots.py RUN_DIR                  # rebuilds RUN_DIR/plots.png and RUN_DIR/viewer.html (viewer.py)
    python plots.py RUN_A RUN_B --out c.png  # one line per run: compare StarPO with StarPO-S

How to read them: a healthy run raises success while entropy, reward std and the in-group reward std
come down slowly. The echo trap (paper section 4) shows as entropy and in-group reward std falling to
~0 BEFORE success drops, the distinct-response fraction falling towards 1/N (all N samples of a prompt
say the same thing), and a spike of the gradient norm at the collapse. The last three panels ask whether
the model still reasons, and about the state: the thought's length, the share of distinct first thoughts
across seeds, and I(prompt; thought) from the model's log-probs (README), which fall to ~0 when one
template thought serves every state.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display on training machines
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

import viewer  # noqa: E402

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
    ("think tokens per turn, median", ["rollout/think_tokens_median"]),
    ("distinct first thoughts across seeds", ["rollout/distinct_thoughts"]),
    ("I(prompt; thought), nats", ["rollout/thought_mi"]),
]

Y_LABELS = {  # panel title -> what its y-axis counts
    "success": "fraction of episodes", "reward mean": "reward per episode",
    "reward std": "std of episode rewards",
    "in-group reward std": "std within a group (mean)", "token entropy": "nats per token",
    "gradient norm": "actor's L2 norm, before clipping", "tokens per trajectory": "tokens",
    "valid-action fraction": "fraction of turns",
    "distinct responses in a group": "distinct / N (1/N: all alike)",
    "think tokens per turn, median": "tokens", "distinct first thoughts across seeds": "distinct / seeds",
    "I(prompt; thought), nats": "nats",
}


def read_metrics(run_dir, with_damaged=False):
    """The rows of RUN_DIR/metrics.jsonl. A damaged line (cut short by a crash, not UTF-8, not JSON, or not a
    row with an integer iteration) is left out; with_damaged, returns (rows, damaged) with damaged a list of
    (line number, what is wrong, the line's bytes)."""
    rows, damaged = [], []
    with open(os.path.join(run_dir, "metrics.jsonl"), "rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                damaged.append((number, "not UTF-8", raw))
                continue
            except json.JSONDecodeError:
                damaged.append((number, "not JSON", raw))
                continue
            if isinstance(row, dict) and type(row.get("iteration")) is int:
                rows.append(row)
            else:
                damaged.append((number, "not a metrics row (an object with an integer iteration)", raw))
    return (rows, damaged) if with_damaged else rows


# one per metric of a panel; evaluations add dots
STYLES = [("-", "solid"), ("--", "dashed"), (":", "dotted")]


def figure(run_dirs, labels=None):
    """One page of panels; each run is one colour, each metric of a panel one line style. The styles are
    named in the panel titles and the runs in one legend above the panels, so no legend covers data."""
    labels = labels or [os.path.basename(os.path.normpath(run_dir)) for run_dir in run_dirs]
    fig, axes = plt.subplots(3, 4, figsize=(20, 11))
    for run_index, run_dir in enumerate(run_dirs):
        rows = read_metrics(run_dir)
        for ax, (title, names) in zip(axes.flat, PANELS):
            for (line, _), name in zip(STYLES, names):
                points = [(r["iteration"], r[name]) for r in rows if name in r]
                if points:
                    xs, ys = zip(*points)
                    ax.plot(xs, ys, line, color=f"C{run_index}",
                            marker="o" if name.startswith("eval/") else None, markersize=3)
    for ax, (title, names) in zip(axes.flat, PANELS):
        styles = [f"{style}{' with dots' * name.startswith('eval/')}: {name}"
                  for (_, style), name in zip(STYLES, names)]
        ax.set_title(title + ("\n" + ", ".join(styles) if len(names) > 1 else f" ({names[0]})"), fontsize=9,
                     y=1.0)  # a fixed height: left to itself, matplotlib measures the axis below it at each draw
        ax.set_xlabel("iteration")
        ax.set_ylabel(Y_LABELS[title], fontsize=9)
        ax.grid(alpha=0.3)
        ax.locator_params(nbins=5)  # a few ticks an axis: each is text that every refresh lays out again
    handles = [Line2D([], [], color=f"C{i}", label=label) for i, label in enumerate(labels)]
    fig.legend(handles=handles, loc="upper center", ncol=min(len(handles), 4), frameon=False, fontsize=11)
    legend_rows = -(-len(handles) // 4)
    # margins fixed for this page of 20 x 11 inches, with room above the panels for the legend: tight_layout would
    # lay out every label again at each refresh, the page's costliest part
    fig.subplots_adjust(left=0.04, right=0.992, bottom=0.053, top=0.933 - 0.02 * legend_rows, wspace=0.175,
                        hspace=0.39)
    return fig


def plot_runs(run_dirs, path, labels=None):
    fig = figure(run_dirs, labels)
    try:
        fig.savefig(path, dpi=80)
    except OSError as error:  # a full disk fails as the file closes, with no file named
        raise OSError(error.errno, error.strerror, path) from None
    finally:
        plt.close(fig)


def plot_run(run_dir):
    """Refresh RUN_DIR/plots.png (the trainer calls it every 10 iterations)."""
    plot_runs([run_dir], os.path.join(run_dir, "plots.png"))


def main(argv):
    """python plots.py RUN_DIR: rebuild the run's own RUN_DIR/plots.png and RUN_DIR/viewer.html (viewer.py).
    Several runs, or --out FILE.png: one figure comparing them (./plots.png without --out)."""
    if not argv or argv[-1] == "--out":
        raise SystemExit("usage: python plots.py RUN_DIR [RUN_DIR ...] [--out FILE.png]")
    out = argv[argv.index("--out") + 1] if "--out" in argv else "plots.png"
    runs = [a for i, a in enumerate(argv) if a != "--out" and (i == 0 or argv[i - 1] != "--out")]
    missing = [run for run in runs if not os.path.isfile(os.path.join(run, "metrics.jsonl"))]
    if missing:
        raise SystemExit(f"error: {missing[0]} has no metrics.jsonl: give run folders "
                         "(the run_dir of a training)")
    if len(runs) == 1 and "--out" not in argv:
        out = os.path.join(runs[0], "plots.png")
    folder = os.path.dirname(out) or "."
    if not os.path.isdir(folder):
        why = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise SystemExit(f"error: --out {out}: {folder} {why}; make that folder first, or give a file in a folder "
                         "that exists")
    if os.path.isdir(out):
        raise SystemExit(f"error: --out {out} is a folder; give a file name, e.g. {os.path.join(out, 'plots.png')}")
    try:
        plot_runs(runs, out)
    except OSError as error:  # a folder it may not write, a full disk
        raise SystemExit(f"error: cannot write {out}: {error.strerror or error}") from None
    except ValueError as error:  # matplotlib: "Format 'txt' is not supported (supported formats: ...)"
        raise SystemExit(f"error: --out {out}: {error}") from None
    print(f"wrote {out}")
    if len(runs) == 1 and "--out" not in argv:
        try:
            print(f"wrote {viewer.write_viewer(runs[0])}")
        except viewer.ViewerError as error:  # a compacted run keeps no samples.jsonl: the plots alone
            print(f"no viewer: {error}")


if __name__ == "__main__":
    main(sys.argv[1:])
