"""findings.py: its tables against hand-computed numbers on hand-built run folders, its figures and tables drawn
from the kept runs (results/runs/findings), the samples reader, the collapse timing and the run scheduler."""
import functools
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import findings  # noqa: E402


def write_run(folder, rows):
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_the_method_table_gives_mean_and_spread_over_seeds(tmp_path):
    # StarPO-S, seeds 0 and 1: success 0.2 -> 0.3 and 0.2 -> 0.5; GRPO seed 0 alone: 0.1 -> 0.1 (best 0.4 at 10)
    write_run(tmp_path / "sokoban-starpo-s-seed0", [{"iteration": 0, "eval/success": 0.2}, {"iteration": 10, "eval/success": 0.25},
                                                    {"iteration": 20, "eval/success": 0.3}])
    write_run(tmp_path / "sokoban-starpo-s-seed1", [{"iteration": 0, "eval/success": 0.2}, {"iteration": 10, "eval/success": 0.35},
                                                    {"iteration": 20, "eval/success": 0.5}])
    write_run(tmp_path / "sokoban-grpo-seed0", [{"iteration": 0, "eval/success": 0.1}, {"iteration": 10, "eval/success": 0.4},
                                                {"iteration": 15, "eval/success": 0.1}])
    table, fig = findings.draw_finding1(str(tmp_path))
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()[2:]}
    # by hand: mean of 0.3 and 0.5 is 0.4, sample std sqrt(((0.1)^2 + (0.1)^2) / 1) = 0.1414; the shortest run
    # ends at 15, where StarPO-S's nearest evaluations are 10 and 20, the earlier taken: 0.25 and 0.35, std 0.0707
    assert table.splitlines()[0].startswith("| runs | seeds | iterations | eval success at 0 | at the end | at iteration ≈15 |")
    assert rows["StarPO-S"] == ("| StarPO-S | 0, 1 | 20, 20 | 0.200 ± 0.000 (n=2) | 0.400 ± 0.141 (n=2) | "
                                "0.300 ± 0.071 (n=2) | 0.400 ± 0.141 (n=2) |")
    assert rows["vanilla StarPO (PPO)"].endswith("not run yet | | | | | |")
    assert rows["vanilla StarPO (GRPO)"] == ("| vanilla StarPO (GRPO) | 0 | 15 | 0.100 (n=1) | 0.100 (n=1) | 0.100 (n=1) | "
                                             "0.400 (n=1) |")
    (starpo, _grpo) = fig.axes[0].lines[:2]
    assert list(starpo.get_xdata()) == [0, 10, 20] and list(starpo.get_ydata()) == pytest.approx([0.2, 0.3, 0.4])


def test_seeds_stopped_by_the_time_limit_are_drawn_at_their_nearby_last_evaluations(tmp_path):
    write_run(tmp_path / "sokoban-starpo-s-seed0", [{"iteration": 0, "eval/success": 0.1}, {"iteration": 20, "eval/success": 0.2},
                                                    {"iteration": 39, "eval/success": 0.3}])
    write_run(tmp_path / "sokoban-starpo-s-seed1", [{"iteration": 0, "eval/success": 0.1}, {"iteration": 20, "eval/success": 0.4},
                                                    {"iteration": 40, "eval/success": 0.5}, {"iteration": 45, "eval/success": 0.7}])
    _, fig = findings.draw_finding1(str(tmp_path))
    line = fig.axes[0].lines[0]
    # seed 0's iterations; at 39, seed 1's nearest evaluation is 40 (one away): (0.3 + 0.5) / 2
    assert list(line.get_xdata()) == [0, 20, 39] and list(line.get_ydata()) == pytest.approx([0.1, 0.3, 0.4])

def test_falls_finds_the_first_window_below_half_the_start():
    points = [(i, 1.0) for i in range(1, 11)] + [(11, 0.8), (12, 0.4), (13, 0.2), (14, 0.2), (15, 0.1), (16, 0.1)]
    # windows of 5 after the first 10: [1, 1, 1, 1, 0.8] ... the mean of (0.8, 0.4, 0.2, 0.2, 0.1) = 0.34 < 0.5, ending at 15
    assert findings.falls(points) == 15
    assert findings.falls([(i, 1.0) for i in range(1, 30)]) is None


def test_the_collapse_table_says_which_indicator_falls_first(tmp_path):
    rows = [{"iteration": 0, "eval/success": 0.2}]
    for i in range(1, 31):
        rows.append({"iteration": i, "rollout/group_reward_std_all": 2.0 if i <= 15 else 0.5,
                     "train/entropy": 1.0 if i <= 25 else 0.3, **({"eval/success": 0.5 if i == 20 else 0.3} if i % 10 == 0 else {})})
    write_run(tmp_path / "sokoban-starpo-s-seed0", rows)
    table, _ = findings.draw_finding3(str(tmp_path))
    # reward std, half of 2.0: (2, 2, .5, .5, .5) ending at 18 has mean 1.1; (2, .5, .5, .5, .5) ending at 19 has 0.8
    # entropy, half of 1.0: (1, 1, .3, .3, .3) at 28 has 0.58; (1, .3, .3, .3, .3) at 29 has 0.44. Best 0.5 at 20, end 0.3
    assert "| sokoban-starpo-s-seed0 | 0.500 (20) | 0.300 | yes | 19 | 29 |" in table


def test_thoughts_are_read_from_samples_md(tmp_path):
    (tmp_path / "samples.md").write_text(
        "\n# Evaluation at iteration 0\n\n## seed 1000000: reward -0.1, success False\n"
        "- turn 1: think 'I see a box' -> actions ['Up'] (format ok: True), reward -0.1\n"
        "- turn 2: think \"it's left\" -> actions [] (format ok: False), reward -0.1\n\n```\n<|im_start|>...\n```\n"
        "\n# Evaluation at iteration 40\n\n## seed 1000000: reward 1, success True\n"
        "- turn 1: think '#' -> actions ['Left'] (format ok: True), reward 1\n")
    assert findings.thoughts_of(str(tmp_path)) == {"Evaluation at iteration 0": {"1000000": ["I see a box", "it's left"]},
                                                    "Evaluation at iteration 40": {"1000000": ["#"]}}


@pytest.mark.slow
def test_every_finding_draws_from_the_kept_runs(tmp_path, monkeypatch):
    """The stored runs in results/runs/findings give each finding a figure and a table; the numbers in the
    tables are those of the metrics files, read here on their own."""
    monkeypatch.chdir(tmp_path)  # draw() writes plots/ and results/findings/ under the working folder
    (tmp_path / "plots").mkdir()
    kept = str(ROOT / "results" / "runs" / "findings")
    for number in findings.FINDINGS:
        table = findings.draw(number, kept)
        assert (tmp_path / "plots" / f"finding{number}.png").stat().st_size > 10_000
        assert table in (tmp_path / "results" / "findings" / f"finding{number}.md").read_text()
    finals = []
    for seed in findings.SEEDS:
        rows = [json.loads(line) for line in open(os.path.join(kept, f"sokoban-starpo-s-seed{seed}", "metrics.jsonl"))]
        finals.append([row for row in rows if "eval/success" in row][-1])
    mean = sum(row["eval/success"] for row in finals) / len(finals)
    std = (sum((row["eval/success"] - mean) ** 2 for row in finals) / (len(finals) - 1)) ** 0.5
    table = findings.draw("1", kept)
    assert f"| StarPO-S | 0, 1, 2 | {', '.join(str(row['iteration']) for row in finals)} |" in table
    assert f"| {mean:.3f} ± {std:.3f} (n=3) |" in table


def test_commands_carry_the_shared_budget_and_each_runs_overrides():
    cmd = findings.command("sokoban-grpo-seed2", "runs/findings/sokoban-grpo-seed2")
    assert cmd[1:4] == ["ragen_mini.py", "--config", "configs/smollm2.yaml"]
    assert set(findings.BUDGET + findings.VANILLA + ["seed=2", "algo.estimator=grpo"]) <= set(cmd)
    assert cmd[-1] == "run_dir=runs/findings/sokoban-grpo-seed2"
    for number, (_, names, _) in findings.FINDINGS.items():
        assert set(names) <= set(findings.RUNS), number
    cmd = findings.command("sokoban-grpo-seed2", "r", ["train.time_limit_min=8"])
    assert cmd.index("train.time_limit_min=8") > cmd.index("train.time_limit_min=28") and cmd[-1] == "run_dir=r"


def test_run_all_runs_what_is_not_done_and_keeps_what_is(tmp_path, monkeypatch):
    script = ("import json, os, sys; d = sys.argv[1].split('=', 1)[1]; os.makedirs(d, exist_ok=True); "
              "open(os.path.join(d, 'metrics.jsonl'), 'w').write(json.dumps({'iteration': 3, 'eval/success': 0.5}) + '\\n')")
    monkeypatch.setattr(findings, "command", lambda name, run_dir, extra: [sys.executable, "-c", script, f"run_dir={run_dir}"])
    monkeypatch.setattr(findings.time, "sleep", lambda seconds: None)
    write_run(tmp_path / "a", [{"iteration": 5, "eval/success": 0.9}])  # done: not run again
    (tmp_path / "a.done").touch()
    write_run(tmp_path / "b", [{"iteration": 0, "eval/success": 0.1}, {"iteration": 20, "eval/success": 0.2}])  # crashed
    findings.run_all(["a", "b", "c"], str(tmp_path), parallel=2)
    assert findings.read(str(tmp_path / "a")) == [{"iteration": 5, "eval/success": 0.9}]
    for name in ("b", "c"):
        assert findings.read(str(tmp_path / name)) == [{"iteration": 3, "eval/success": 0.5}]
        assert (tmp_path / f"{name}.log").exists() and findings.done(str(tmp_path / name))


def test_a_failed_run_is_not_marked_done(tmp_path, monkeypatch):
    monkeypatch.setattr(findings, "command", lambda name, run_dir, extra: [sys.executable, "-c", "raise SystemExit(3)"])
    monkeypatch.setattr(findings.time, "sleep", lambda seconds: None)
    findings.run_all(["x"], str(tmp_path), parallel=1)
    assert not findings.done(str(tmp_path / "x"))


def test_keep_takes_the_run_folders_of_a_glob_and_refuses_a_folder_with_no_metrics(tmp_path, monkeypatch, capsys):
    runs, into = tmp_path / "runs", tmp_path / "kept"
    write_run(runs / "a", [{"iteration": 0, "eval/success": 0.1}, {"iteration": 20, "eval/success": 0.3}])
    (runs / "a" / "config.yaml").write_text("seed: 0\n")
    (runs / "a" / "samples.md").write_text("# Evaluation at iteration 0\n\n## seed 7: reward 1, success True\n"
                                           "- turn 1: think 'up' -> actions ['Up'] (format ok: True), reward 1\n")
    (runs / "a.log").write_text("log\n")
    (runs / "a.done").touch()
    monkeypatch.chdir(tmp_path)  # main() moves to the repository; this puts the working folder back afterwards
    monkeypatch.setattr(findings, "keep", functools.partial(findings.keep, into=str(into)))
    findings.main(["--keep", str(runs / "a"), str(runs / "a.log"), str(runs / "a.done")])  # as `--keep runs/*` names them
    assert sorted(p.name for p in (into / "a").iterdir()) == ["config.yaml", "metrics.jsonl", "thoughts.json"]
    assert json.loads((into / "a" / "thoughts.json").read_text()) == {"Evaluation at iteration 0": {"7": ["up"]}}
    (runs / "b").mkdir()
    with pytest.raises(SystemExit):
        findings.main(["--keep", str(runs / "b")])
    assert f"no metrics.jsonl in {runs / 'b'}" in capsys.readouterr().err
