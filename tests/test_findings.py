"""findings.py: its tables against hand-computed numbers on hand-built run folders, its figures and tables drawn
from the kept runs (results/runs/findings), the samples reader, the collapse timing, the run scheduler, and that
no mode removes or changes a folder of runs findings.py did not start."""
import functools
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import findings  # noqa: E402


@pytest.fixture(autouse=True)
def no_gpu_query(monkeypatch):
    """The GPU's free memory is asked of a child process (findings.free_gpu_gib); these tests start none."""
    monkeypatch.setattr(findings, "free_gpu_gib", lambda: None)


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
    lines = table.splitlines()
    head = next(k for k, line in enumerate(lines) if line.startswith("| arm |"))
    rows = {line.split(" | ")[0].strip("| "): line for line in lines[head + 2:head + 5]}
    # by hand: mean of 0.3 and 0.5 is 0.4, sample std sqrt(((0.1)^2 + (0.1)^2) / 1) = 0.1414; the shortest run
    # ends at 15, where StarPO-S's nearest evaluations are 10 and 20, the earlier taken: 0.25 and 0.35, std 0.0707.
    # No config.yaml: one version (A), and no optimiser steps to work out
    assert lines[head] == ("| arm | seeds | versions | iterations | optimiser steps / trained tokens per iteration | "
                           "eval success at 0 | at the end | at iteration ≈15 | best |")
    assert rows["StarPO-S"] == ("| StarPO-S | 0, 1 | A, A | 20, 20 | not logged / not logged | 0.200 ± 0.000 (n=2) | "
                                "0.400 ± 0.141 (n=2) | 0.300 ± 0.071 (n=2) | 0.400 ± 0.141 (n=2) |")
    assert rows["vanilla PPO"] == "| vanilla PPO | not run yet | | | | | | | |"
    assert rows["vanilla GRPO"] == ("| vanilla GRPO | 0 | A | 15 | not logged / not logged | 0.100 (n=1) | 0.100 (n=1) | "
                                    "0.100 (n=1) | 0.400 (n=1) |")
    assert "mixed versions" not in table
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

def test_an_arm_whose_trained_tokens_are_estimated_for_one_run_is_marked_as_an_estimate():
    # 32 groups x 8, filter 0.25: 8 groups x 8 = 64 kept trajectories in mini-batches of 32, 2 passes: 4 steps
    cfg = {"rollout": {"groups": 32, "group_size": 8},
           "algo": {"filter_ratio": 0.25, "mini_batch_size": 32, "ppo_epochs": 2}}
    logged = findings.Run("a-seed0", "", [{"iteration": 1, findings.TOKENS_KEY: 1000.0}], cfg)
    # not logged: 64 kept trajectories x 30 sampled tokens on average = 1,920
    estimated = findings.Run("a-seed1", "", [{"iteration": 1, "rollout/response_tokens": 30.0}], cfg)
    assert findings.updates_cell([logged]) == "4 (config) / 1,000"
    assert findings.updates_cell([estimated]) == "4 (config) / ≈1,920"
    assert findings.updates_cell([logged, estimated]) == "4 (config) / ≈1,460"  # (1,000 + 1,920) / 2


def test_a_seed_that_ran_longer_goes_on_alone_in_the_figure(tmp_path):
    write_run(tmp_path / "sokoban-starpo-s-seed0", [{"iteration": i, "eval/success": 0.1 + i / 100} for i in (0, 10, 20)])
    write_run(tmp_path / "sokoban-starpo-s-seed1", [{"iteration": i, "eval/success": 0.2} for i in (0, 10, 20, 30, 40)])
    _, fig = findings.draw_finding1(str(tmp_path))
    mean, alone = fig.axes[0].lines[:2]
    assert list(mean.get_xdata()) == [0, 10, 20] and list(mean.get_ydata()) == pytest.approx([0.15, 0.2, 0.25])
    # seed 1 from the end of the common part (20) to its own end, its own values
    assert list(alone.get_xdata()) == [20, 30, 40] and list(alone.get_ydata()) == [0.2, 0.2, 0.2]
    assert alone.get_linestyle() == "--" and alone.get_label() == "StarPO-S, seed 1 alone"


def test_first_change_finds_the_first_window_past_the_factor():
    points = [(i, 1.0) for i in range(1, 6)] + [(6, 0.8), (7, 0.4), (8, 0.2), (9, 0.2), (10, 0.1)]
    # the first 5 average 1.0; windows of 3 after them: (0.8, 0.4, 0.2) = 0.467 < 0.5, ending at iteration 8
    assert findings.first_change(points, 0.5) == 8
    # growing by half: (1, 1, 1, 1, 1) then (1.2, 1.6, 2.0): 1.6 > 1.5 at iteration 8; (1.2, 1.4, 1.5) never
    assert findings.first_change([(i, 1.0) for i in range(1, 6)] + [(6, 1.2), (7, 1.6), (8, 2.0)], 1.5) == 8
    assert findings.first_change([(i, 1.0) for i in range(1, 6)] + [(6, 1.2), (7, 1.4), (8, 1.5)], 1.5) is None
    assert findings.first_change([(i, 1.0) for i in range(1, 30)], 0.5) is None
    assert findings.first_change([(1, 1.0), (2, 0.0)], 0.5) is None  # too short to judge


def test_the_collapse_table_says_which_indicator_falls_first(tmp_path):
    rows = [{"iteration": 0, "eval/success": 0.2}]
    for i in range(1, 31):
        rows.append({"iteration": i, "rollout/success": 0.2 if i <= 12 else 0.05,
                     "rollout/valid_action_frac": 0.9, "rollout/response_tokens": 100.0 if i <= 10 else 200.0,
                     "rollout/group_reward_std_all": 2.0 if i <= 15 else 0.5,
                     "train/entropy": 1.0 if i <= 25 else 0.3, "rollout/think_tokens_median": 10.0 if i <= 8 else 2.0,
                     **({"eval/success": 0.5 if i == 20 else 0.3} if i % 10 == 0 else {})})
    write_run(tmp_path / "sokoban-starpo-s-seed0", rows)
    table, _ = findings.draw_finding3(str(tmp_path))
    # windows of 3 against iterations 1-5. Success, half of 0.2: (.2, .05, .05) ending at 14 has 0.1, not below;
    # (.05, .05, .05) at 15. Replies, 1.5 x 100: (100, 200, 200) ending at 12 has 167. Reward std, half of 2.0:
    # (2, .5, .5) at 17 has 1.0, not below; at 18, 0.5. Entropy, half of 1.0: (1, .3, .3) at 27 has 0.53; at 28, 0.3.
    # Thoughts reach 3 tokens at 9. Evaluations 0.2, 0.3, 0.5, 0.3: deepest fall 0.2 (no noise floor here: "—")
    assert ("| sokoban-starpo-s-seed0 | A | 0.200 | — | not logged | 15 | never | 12 | 18 | 28 | 9 |"
            in table.splitlines())


def record(title, seed, thoughts):
    """A sample record (evaluation.episode_record) with one turn per thought; the rest as a run writes it."""
    return dict(title=title, iteration=int(title.split()[-1]) if title[-1].isdigit() else 0, episode=0, seed=seed,
                reward=-0.1, success=False,
                turns=[dict(turn=k, state="#P#", actions_left=10, reply=f"{think}</think>", think=think, answer="",
                            actions=[], format_ok=False, format_problem="no <answer> right after </think>", reward=-0.1)
                       for k, think in enumerate(thoughts, 1)])


def test_thoughts_are_read_from_the_records(tmp_path):
    """A thought that writes a heading and a seed line of the old samples.md stays that seed's thought, under
    its own evaluation: the next seed's thoughts are not filed under an "Evaluation at iteration 99"."""
    forged = "plan:\n# Evaluation at iteration 99\n## seed 5: reward 10, success True\n- turn 1: think 'x'"
    records = [record("Evaluation at iteration 0", 1000000, ["I see a box", forged]),
               record("Evaluation at iteration 0", 1000001, ["it's left"]),
               record("Evaluation at iteration 40", 1000000, ["#"])]
    for k, r in enumerate(records[:2]):
        r["episode"] = k
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert findings.thoughts_of(str(tmp_path)) == {
        "Evaluation at iteration 0": {"1000000": ["I see a box", forged], "1000001": ["it's left"]},
        "Evaluation at iteration 40": {"1000000": ["#"]}}


def test_thoughts_of_an_older_run_without_records_say_so(tmp_path):
    (tmp_path / "samples.md").write_text("# Evaluation at iteration 0\n")
    with pytest.raises(SystemExit, match="has no samples.jsonl"):
        findings.thoughts_of(str(tmp_path))


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
    iterations = ", ".join(str(row["iteration"]) for row in finals)
    assert re.search(rf"^\| StarPO-S \| 0, 1, 2 \| [A-Z], [A-Z], [A-Z] \| {iterations} \|", table, re.MULTILINE), table
    assert f"| {mean:.3f} ± {std:.3f} (n=3) |" in table


def test_commands_carry_the_shared_budget_and_each_runs_overrides():
    cmd = findings.command("sokoban-grpo-seed2", "runs/findings/sokoban-grpo-seed2")
    assert cmd[1:4] == ["ragen_mini.py", "--config", "configs/smollm2.yaml"]
    assert set(findings.LONG + findings.VANILLA + ["seed=2", "algo.estimator=grpo"]) <= set(cmd)
    assert cmd[-1] == "run_dir=runs/findings/sokoban-grpo-seed2"
    for number, (_, names, _) in findings.FINDINGS.items():
        assert set(names) <= set(findings.RUNS), number
    cmd = findings.command("sokoban-grpo-seed2", "r", ["train.iterations=40"])
    assert cmd.index("train.iterations=40") > cmd.index("train.iterations=200") and cmd[-1] == "run_dir=r"


def test_run_all_runs_what_is_not_done_and_keeps_what_is(tmp_path, monkeypatch):
    script = ("import json, os, sys; d = sys.argv[1].split('=', 1)[1]; os.makedirs(d, exist_ok=True); "
              "open(os.path.join(d, 'metrics.jsonl'), 'w').write(json.dumps({'iteration': 3, 'eval/success': 0.5}) + '\\n')")
    monkeypatch.setattr(findings, "command", lambda name, run_dir, extra: [sys.executable, "-c", script, f"run_dir={run_dir}"])
    monkeypatch.setattr(findings.time, "sleep", lambda seconds: None)
    write_run(tmp_path / "a", [{"iteration": 5, "eval/success": 0.9}])  # done: not run again
    (tmp_path / "a.done").touch()
    write_run(tmp_path / "b", [{"iteration": 0, "eval/success": 0.1}, {"iteration": 20, "eval/success": 0.2}])  # crashed
    (tmp_path / "b" / findings.MARK).touch()  # run_all started it: it may start again
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
    write_run(runs / "a", [{"iteration": 0, "eval/success": 0.1},
                           {"iteration": 20, "eval/success": 0.3, "perf/trained_tokens": 123456.0,
                            "train/policy_loss": 0.5}])
    (runs / "a" / "config.yaml").write_text("seed: 0\n")
    (runs / "a" / "samples.jsonl").write_text(json.dumps(record("Evaluation at iteration 0", 7, ["up"])) + "\n")
    (runs / "a.log").write_text("log\n")
    (runs / "a.done").touch()
    monkeypatch.chdir(tmp_path)  # main() moves to the repository; this puts the working folder back afterwards
    monkeypatch.setattr(findings, "keep", functools.partial(findings.keep, into=str(into)))
    findings.main(["--keep", str(runs / "a"), str(runs / "a.log"), str(runs / "a.done")])  # as `--keep runs/*` names them
    assert sorted(p.name for p in (into / "a").iterdir()) == ["answers.json", "config.yaml", "metrics.jsonl", "thoughts.json"]
    assert json.loads((into / "a" / "thoughts.json").read_text()) == {"Evaluation at iteration 0": {"7": ["up"]}}
    assert json.loads((into / "a" / "answers.json").read_text()) == {"Evaluation at iteration 0": {"7": [[]]}}
    # the update's trained tokens stay beside what the figures draw (4 significant digits); the policy loss goes
    assert findings.read(str(into / "a"))[1] == {"iteration": 20, "eval/success": 0.3,
                                                 "perf/trained_tokens": 123500.0}
    before = (into / "a" / "metrics.jsonl").read_text()  # keeping it again never replaces the kept one
    with pytest.raises(SystemExit, match="holds a kept run already"):
        findings.main(["--keep", str(runs / "a")])
    assert (into / "a" / "metrics.jsonl").read_text() == before
    (runs / "b").mkdir()
    with pytest.raises(SystemExit):
        findings.main(["--keep", str(runs / "b")])
    assert f"no metrics.jsonl in {runs / 'b'}" in capsys.readouterr().err


# ======================================================================================================
# Kept runs and runs of one's own are never removed or changed: every mode against a copy of the kept runs,
# with the figures and tables sent to a scratch folder (draw's `into`), compared byte for byte afterwards
# ======================================================================================================
KEPT = ROOT / "results" / "runs" / "findings"


def files_under(folder):
    """{relative path: bytes} of every file under FOLDER (empty if there is none)."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def checkout_drawings():
    """The checkout's own figures and tables, which no test may write."""
    paths = [*(ROOT / "plots").glob("finding*.png"), *(ROOT / "results" / "findings").glob("*")]
    return {str(p.relative_to(ROOT)): p.read_bytes() for p in paths}


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """-> draw()'s output folder here; nothing is started (Popen fails the test) unless a test allows it."""
    monkeypatch.chdir(tmp_path)  # main() moves to the repository; this puts the working folder back after
    out = tmp_path / "drawn"
    monkeypatch.setattr(findings, "draw", functools.partial(findings.draw, into=str(out)))

    def no_run(*args, **kwargs):
        pytest.fail(f"a run was started: {args}")
    monkeypatch.setattr(findings.subprocess, "Popen", no_run)
    monkeypatch.setattr(findings.time, "sleep", lambda seconds: None)
    before = checkout_drawings()
    yield out
    assert checkout_drawings() == before


def refused(argv):
    """main(ARGV) exits with a one-line error (not a traceback); -> its text."""
    with pytest.raises(SystemExit) as exit_:
        findings.main(argv)
    message = str(exit_.value.code)
    assert message.startswith("error: ") and "\n" not in message
    return message


def test_the_run_mode_refuses_a_folder_of_kept_runs_and_changes_nothing(tmp_path, scratch, capsys):
    copy = tmp_path / "kept"
    shutil.copytree(KEPT, copy)
    before = files_under(copy)
    findings.main(["--runs", str(copy)])  # the listing
    assert "Finding 7:" in capsys.readouterr().out
    for number in findings.FINDINGS:
        assert str(copy) in refused([number, "--runs", str(copy), "--set", "rollout.groups=0"])
    assert files_under(copy) == before
    assert not scratch.exists()  # nothing drawn


@pytest.mark.slow
def test_drawing_every_finding_from_kept_runs_writes_only_its_figure_and_table(tmp_path, scratch):
    copy = tmp_path / "kept"
    shutil.copytree(KEPT, copy)
    before = files_under(copy)
    for number in findings.FINDINGS:
        findings.main([number, "--draw", "--runs", str(copy)])
    assert files_under(copy) == before
    drawn = files_under(scratch)
    assert sorted(drawn) == sorted([f"plots/finding{n}.png" for n in findings.FINDINGS]
                                   + [f"results/findings/finding{n}.md" for n in findings.FINDINGS])
    assert all(len(drawn[f"plots/finding{n}.png"]) > 10_000 for n in findings.FINDINGS)


@pytest.mark.slow
def test_a_run_without_a_metric_is_drawn_without_it_and_said_so(tmp_path, scratch, capsys):
    """Finding 3 reads the in-group reward std and the entropy: a run whose metrics.jsonl lacks them (logged
    before they existed, or edited) is left out of those panels with a note, and its table row says so."""
    copy = tmp_path / "kept"
    shutil.copytree(KEPT, copy)
    path = copy / "sokoban-grpo-seed0" / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({k: v for k, v in row.items() if k != "train/entropy"}) + "\n"
                            for row in rows))
    table = findings.main(["3", "--draw", "--runs", str(copy)])
    row = next(line for line in table.splitlines() if line.startswith("| sokoban-grpo-seed0 |"))
    assert "| no train/entropy logged |" in row
    assert "note: sokoban-grpo-seed0 has no train/entropy in its metrics.jsonl" in capsys.readouterr().out


def test_drawing_from_a_folder_with_no_runs_is_refused_and_writes_nothing(tmp_path, scratch):
    empty = tmp_path / "empty"
    empty.mkdir()
    for runs in (empty, tmp_path / "nowhere"):
        assert str(runs) in refused(["1", "--draw", "--runs", str(runs)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"] and not any(empty.iterdir())


def test_a_run_folder_of_its_own_not_done_is_removed_and_started_again(tmp_path, scratch, monkeypatch):
    runs = tmp_path / "runs"
    stale = runs / "sokoban-starpo-s-seed0"
    stale.mkdir(parents=True)
    (stale / findings.MARK).touch()
    (stale / "samples.md").write_text("a run cut short\n")
    started = []

    class Run:
        """Starts in a folder of findings.py's own holding nothing else, writes a short run and ends well."""
        returncode = 0

        def __init__(self, cmd, **kwargs):
            run_dir = Path(cmd[-1].split("=", 1)[1])
            started.append(run_dir.name)
            assert [p.name for p in run_dir.iterdir()] == [findings.MARK]
            rows = [{"iteration": i, "eval/success": 0.1, "rollout/think_tokens_median": 9.0}
                    for i in (0, 10)]
            (run_dir / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
            (run_dir / "thoughts.json").write_text(json.dumps({f"Evaluation at iteration {i}": {"7": ["up"]}
                                                               for i in (0, 10)}))

        def poll(self):
            return 0
    monkeypatch.setattr(findings.subprocess, "Popen", Run)
    findings.main(["2", "--runs", str(runs)])
    assert started == findings.FINDINGS["2"][1] and "sokoban-starpo-s-seed0" in started
    ends = (".done", ".log", f"/{findings.MARK}", "/metrics.jsonl", "/thoughts.json")  # no stale samples.md
    assert sorted(files_under(runs)) == sorted(f"{name}{end}" for name in started for end in ends)
    assert sorted(files_under(scratch)) == ["plots/finding2.png", "results/findings/finding2.md"]


@pytest.mark.parametrize("folder, file", [("bandit-starpo-s-seed0", "notes.txt"),  # one of the finding's runs
                                          ("my-run", "metrics.jsonl")])  # a run folder of anyone's
def test_a_folder_it_did_not_start_makes_the_run_mode_refuse(tmp_path, scratch, folder, file):
    runs = tmp_path / "runs"
    (runs / "sokoban-starpo-s-seed0").mkdir(parents=True)  # its own, cut short: not removed either
    (runs / "sokoban-starpo-s-seed0" / findings.MARK).touch()
    (runs / "sokoban-starpo-s-seed0" / "samples.md").write_text("a run cut short\n")
    (runs / folder).mkdir()
    (runs / folder / file).write_text("{}\n")
    before = files_under(runs)
    assert str(runs / folder) in refused(["2", "--runs", str(runs)])
    assert files_under(runs) == before and sorted(p.name for p in runs.iterdir()) == sorted(
        ["sokoban-starpo-s-seed0", folder])
    assert not scratch.exists()
