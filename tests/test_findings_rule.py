"""findings.py's decision rule, versions, measures and protocol against numbers worked out by hand on hand-built
run folders: the verdict words, the noise floor, the mark on mixed versions, optimiser steps and trained
tokens, windows of a metric, thoughts that contradict their answer, and what `findings.py all` starts."""
import json
import math
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import config  # noqa: E402
import findings  # noqa: E402


REAL_FREE_GPU_GIB = findings.free_gpu_gib


@pytest.fixture(autouse=True)
def no_gpu_query(monkeypatch):
    """The GPU's free memory is asked of a child process (findings.free_gpu_gib); these tests start none."""
    monkeypatch.setattr(findings, "free_gpu_gib", lambda: None)


def config_of(seed, **changes):
    """A run's config.yaml as findings.py reads it: the keys it looks at, Sokoban StarPO-S's values."""
    cfg = {"seed": seed, "env": {"name": "sokoban", "kwargs": {}, "max_turns": 10, "max_actions_per_turn": 1},
           "rollout": {"think": True, "groups": 32, "group_size": 8},
           "algo": {"filter_ratio": 0.25, "mini_batch_size": 32, "ppo_epochs": 1, "micro_batch_tokens": 16384},
           "train": {"iterations": 40, "time_limit_min": 0.0}}
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        cfg.setdefault(section, {})[key] = value
    return cfg


def write_run(runs, name, evals, cfg=None, rows=()):
    """RUNS/NAME with evaluations {iteration: success}, extra metrics ROWS and CFG (seed from the name)."""
    folder = runs / name
    folder.mkdir(parents=True)
    by_iteration = {row["iteration"]: dict(row) for row in rows}
    for i, success in evals.items():
        by_iteration.setdefault(i, {"iteration": i})["eval/success"] = success
    (folder / "metrics.jsonl").write_text("".join(json.dumps(by_iteration[i]) + "\n" for i in sorted(by_iteration)))
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg or config_of(int(name[-1]))))
    return folder


def arms(runs, a_label, a_values, b_label, b_values):
    """Two arms of three seeds each, their success at iteration 40 (0.2 at iteration 0)."""
    for label, values in ((a_label, a_values), (b_label, b_values)):
        for name, value in zip(findings.ARMS[label], values):
            write_run(runs, name, {0: 0.2, 40: value})


def test_reproduced_contradicted_and_not_reproduced_by_hand(tmp_path):
    # A: 0.30, 0.32, 0.34 (mean 0.32, sd 0.02); B: 0.20, 0.22, 0.30 (mean 0.24, sd sqrt((.04^2 + .02^2 + .06^2) / 2)
    # = 0.0529). SE = sqrt(0.02^2 / 3 + 0.0529^2 / 3) = 0.0327; d = 0.080 = 2.4 SE; A above B in 3 of 3 seeds
    arms(tmp_path, "StarPO-S", [0.30, 0.32, 0.34], "vanilla PPO", [0.20, 0.22, 0.30])
    row, word = findings.judge(findings.Claim("A above B", findings.SUCCESS, "StarPO-S", "vanilla PPO"), str(tmp_path), None)
    assert word == "reproduced"
    assert "| +0.080 | 0.033 (2.4 SE) | 3 of 3 seeds | reproduced |" in row
    assert "StarPO-S: 0.320 ± 0.020 (n=3) | vanilla PPO: 0.240 ± 0.053 (n=3)" in row
    row, word = findings.judge(findings.Claim("A below B", findings.SUCCESS, "StarPO-S", "vanilla PPO", direction=-1),
                               str(tmp_path), None)
    assert word == "contradicted" and "| 0 of 3 seeds | contradicted |" in row
    # the paper sees no gain of A over B: a gain beyond 2 SE in 3 of 3 seeds contradicts it; B over A does not
    assert findings.judge(findings.Claim("no gain", findings.SUCCESS, "StarPO-S", "vanilla PPO", direction=0),
                          str(tmp_path), None)[1] == "contradicted"
    assert findings.judge(findings.Claim("no gain", findings.SUCCESS, "vanilla PPO", "StarPO-S", direction=0),
                          str(tmp_path), None)[1] == "reproduced"


def test_a_difference_within_twice_its_standard_error_is_not_reproduced(tmp_path):
    # B: 0.20, 0.40, 0.12: mean 0.24, sd sqrt((.04^2 + .16^2 + .12^2) / 2) = 0.1442; SE = sqrt(.02^2/3 + .1442^2/3)
    # = 0.0841, and d = 0.08 is 1.0 SE though A is above B in 2 of 3 seeds
    arms(tmp_path, "StarPO-S", [0.30, 0.32, 0.34], "vanilla PPO", [0.20, 0.40, 0.12])
    row, word = findings.judge(findings.Claim("A above B", findings.SUCCESS, "StarPO-S", "vanilla PPO"), str(tmp_path), None)
    assert word == "not reproduced" and "| +0.080 | 0.084 (1.0 SE) | 2 of 3 seeds |" in row


def test_beyond_twice_the_standard_error_is_not_enough_without_two_thirds_of_the_seeds(tmp_path, monkeypatch):
    # five seeds: A 0.300, 0.301, 0.302, 0.303, 0.304 (sd 0.0016); B 0.20, 0.20, 0.31, 0.31, 0.20 (mean 0.244, sd
    # sqrt((3 x 0.044^2 + 2 x 0.066^2) / 4) = 0.0602). SE = sqrt(0.0016^2 / 5 + 0.0602^2 / 5) = 0.0270 and d = 0.058
    # is 2.2 SE, but A is above B in 3 of 5 seeds, fewer than two thirds
    for label, values in (("X", [0.300, 0.301, 0.302, 0.303, 0.304]), ("Y", [0.20, 0.20, 0.31, 0.31, 0.20])):
        monkeypatch.setitem(findings.ARMS, label, [f"{label.lower()}-seed{s}" for s in range(5)])
        for name, value in zip(findings.ARMS[label], values):
            write_run(tmp_path, name, {0: 0.2, 40: value})
    row, word = findings.judge(findings.Claim("A above B", findings.SUCCESS, "X", "Y"), str(tmp_path), None)
    assert word == "not reproduced" and "| +0.058 | 0.027 (2.2 SE) | 3 of 5 seeds | not reproduced |" in row


def test_one_arm_early_and_late_is_judged_on_its_paired_differences(tmp_path):
    # thoughts of 3 seeds: first 10 iterations 10, 12, 14 tokens; last 10: 2, 3, 2. Differences -8, -9, -12: mean -9.667,
    # sd sqrt((1.667^2 + 0.667^2 + 2.333^2) / 2) = 2.082, SE = 2.082 / sqrt(3) = 1.202: 8.0 SE
    for name, (early, late) in zip(findings.ARMS["StarPO-S"], [(10, 2), (12, 3), (14, 2)]):
        write_run(tmp_path, name, {0: 0.2, 20: 0.2}, rows=[
            {"iteration": i, "rollout/think_tokens_median": float(early if i <= 10 else late)} for i in range(1, 21)])
    think = [f"think tokens per turn (median), {w} 10 iterations" for w in ("last", "first")]
    row, word = findings.judge(findings.Claim("shrinks", think[0], "StarPO-S", measure_b=think[1], direction=-1),
                               str(tmp_path), None)
    assert word == "reproduced"
    assert ("| shrinks | think tokens per turn (median) | last 10 iterations: 2.3 ± 0.6 (n=3) | first 10 iterations: "
            "12.0 ± 2.0 (n=3) | -9.7 | 1.2 (8.0 SE) | 3 of 3 seeds | reproduced |") in row


def test_fewer_than_three_seeds_is_open_and_the_papers_own_null_is_not_testable(tmp_path):
    arms(tmp_path, "StarPO-S", [0.30, 0.32], "vanilla PPO", [0.20, 0.22, 0.30])
    row, word = findings.judge(findings.Claim("A above B", findings.SUCCESS, "StarPO-S", "vanilla PPO"), str(tmp_path), None)
    assert word == "open" and "seed 0: +0.100, seed 1: +0.100" in row
    # the paper's 0.207 against 0.203 on 256 seeds: SE of the difference sqrt(.207 x .793 / 256 + .203 x .797 / 256)
    # = 0.0357, so 0.004 is far below 2 SE; its 0.281 against 0.121 (SE 0.0347) is 4.6 SE: testable, so open here
    assert findings.paper_shows_no_effect(0.207, 0.203) and not findings.paper_shows_no_effect(0.281, 0.121)
    assert findings.judge(findings.Claim("x", findings.SUCCESS, "StarPO-S", "vanilla PPO", paper=(0.207, 0.203)),
                          str(tmp_path), None)[1] == "not testable here"
    assert findings.judge(findings.Claim("x", findings.SUCCESS, "StarPO-S", "vanilla PPO", paper=(0.281, 0.121)),
                          str(tmp_path), None)[1] == "open"
    assert findings.judge(findings.Claim("x", findings.SUCCESS, "StarPO-S", "vanilla GRPO"), str(tmp_path), None) == (
        f"| x | {findings.SUCCESS} | not run yet: vanilla GRPO | | | | | open |", "open")


def test_the_noise_floor_and_the_falls_it_judges(tmp_path):
    # seed-0 runs alike at iteration 0: 0.20, 0.22, 0.24 (sd 0.02): the floor is 2 x sqrt(2) x 0.02 = 0.0566
    write_run(tmp_path, "sokoban-starpo-s-seed0", {0: 0.20, 40: 0.25})
    write_run(tmp_path, "sokoban-ppo-seed0", {0: 0.24, 40: 0.25})
    # GRPO falls 0.22 -> 0.10 (0.12: a fall), 0.20 -> 0.16 (0.04: noise), 0.20 -> 0.30 -> 0.22 (0.08 after a rise of 0.10)
    write_run(tmp_path, "sokoban-grpo-seed0", {0: 0.22, 20: 0.10, 40: 0.15})
    write_run(tmp_path, "sokoban-grpo-seed1", {0: 0.20, 20: 0.16, 40: 0.18})
    write_run(tmp_path, "sokoban-grpo-seed2", {0: 0.20, 20: 0.30, 40: 0.22})
    write_run(tmp_path, "sokoban-no-think-seed0", {0: 0.90, 40: 0.9}, config_of(0, **{"rollout.think": False}))
    values, sd, floor = findings.noise_floor(str(tmp_path))
    assert sorted(values) == [0.20, 0.22, 0.24] and sd == pytest.approx(0.02) and floor == pytest.approx(0.0565685)
    row, word = findings.judge(findings.Claim("GRPO collapses", findings.FELL, "vanilla GRPO"), str(tmp_path),
                               (values, sd, floor))
    assert word == "reproduced" and "in 2 of 3 runs: sokoban-grpo-seed0, sokoban-grpo-seed2 |" in row
    rose = "eval success rises by more than the noise floor, then falls by more"
    row, word = findings.judge(findings.Claim("rises, then falls", rose, "vanilla GRPO"), str(tmp_path), (values, sd, floor))
    assert word == "not reproduced" and "in 1 of 3 runs: sokoban-grpo-seed2 |" in row
    assert findings.deepest_fall([(0, 0.2), (20, 0.3), (40, 0.22), (60, 0.25), (80, 0.1)]) == (
        pytest.approx(0.2), (20, 0.3), (80, 0.1))
    assert findings.deepest_fall([(0, 0.2), (20, 0.3)]) == (0.0, (20, 0.3), (20, 0.3))
    assert findings.noise_floor(str(tmp_path / "nowhere")) is None


def test_a_table_of_runs_of_two_versions_is_marked_and_so_are_their_verdicts(tmp_path):
    run = {"commit": "0123456789abcdef", "clean": True}
    arms(tmp_path, "StarPO-S", [0.30, 0.32, 0.34], "vanilla PPO", [0.20, 0.22, 0.30])
    for name in findings.ARMS["StarPO-S"]:
        (tmp_path / name / "config.yaml").write_text(yaml.safe_dump({**config_of(int(name[-1])), "code": run}))
    table, _ = findings.draw_finding1(str(tmp_path))
    lines = table.splitlines()
    assert lines[0].startswith("**⚠ mixed versions: these runs come from 2 code versions or budgets (A, B)")
    assert lines[1:3] == [
        "- version A: commit 0123456789; 40 iterations, no time limit, micro-batches of 16384 tokens",
        "- version B: unknown commit; 40 iterations, no time limit, micro-batches of 16384 tokens"]
    assert "| StarPO-S | 0, 1, 2 | A, A, A | 40, 40, 40 |" in table and "| vanilla PPO | 0, 1, 2 | B, B, B |" in table
    row = findings.judge(findings.Claim("x", findings.SUCCESS, "StarPO-S", "vanilla PPO"), str(tmp_path), None)[0]
    assert row.endswith("| reproduced † |")
    # one commit, one budget: no mark; a dirty tree or another budget is another version
    assert findings.version({**config_of(0), "code": {**run, "clean": False}}).startswith(
        "commit 0123456789 with uncommitted changes;")
    assert findings.version(config_of(0, **{"train.time_limit_min": 8.0})) == (
        "unknown commit; 40 iterations, a time limit of 8 minutes, micro-batches of 16384 tokens")
    assert findings.versions([])[1] == []


def test_optimiser_steps_come_from_the_config_and_tokens_from_the_metrics(tmp_path):
    # 32 groups x 8: no filter keeps 256 trajectories, 8 mini-batches of 32; 25% keeps 8 groups (64), 2 of them, or
    # 8 of 8; 0.5 of 16 FrozenLake groups keeps 8 (64); the Bandit's 8 x 16 at 25% keeps 2 groups, 32 trajectories
    def steps(**changes):
        return findings.optimiser_steps(findings.Run("r", "", [], config_of(0, **changes)))
    assert steps(**{"algo.filter_ratio": 1.0}) == (8, "config")
    assert steps() == (2, "config") and steps(**{"algo.mini_batch_size": 8}) == (8, "config")
    assert steps(**{"algo.filter_ratio": 0.5, "rollout.groups": 16}) == (2, "config")
    assert steps(**{"rollout.groups": 8, "rollout.group_size": 16, "algo.ppo_epochs": 2}) == (2, "config")
    rows = [{"iteration": 1, "rollout/response_tokens": 100.0}, {"iteration": 2, "rollout/response_tokens": 200.0}]
    # not logged: 64 kept trajectories x 150 sampled tokens on average
    assert findings.trained_tokens(findings.Run("r", "", rows, config_of(0))) == (9600, "estimate")
    logged = [{**row, "perf/trained_tokens": t} for row, t in zip(rows, (1000, 3000))]
    run = findings.Run("r", "", logged, config_of(0))
    assert findings.trained_tokens(run) == (2000, "logged")
    assert findings.updates_cell([findings.Run("r", "", rows, config_of(0))]) == "2 (config) / ≈9,600"
    assert findings.updates_cell([run]) == "2 (config) / 2,000"


def test_windows_of_a_metric_and_their_trend():
    # I(X;R) at iterations 1-10: 0.4, 0.2, ... (mean 0.3, sd sqrt(10 x 0.1^2 / 9) = 0.1054, SE 0.0333); 11-20: 0.1,
    # 0.0, ... (mean 0.05, SE 0.0167). The difference -0.25 is 6.7 standard errors (sqrt(0.0333^2 + 0.0167^2) = 0.0373)
    rows = [{"iteration": i, "rollout/thought_mi": (0.4 if i % 2 else 0.2) if i <= 10 else (0.1 if i % 2 else 0.0)}
            for i in range(0, 21)]
    first, last = findings.window(rows, "rollout/thought_mi"), findings.window(rows, "rollout/thought_mi", last=True)
    assert first == pytest.approx((0.3, 0.1054 / math.sqrt(10), 10), rel=1e-3)
    assert last == pytest.approx((0.05, 0.0527 / math.sqrt(10), 10), rel=1e-3)
    assert findings.trend(rows, "rollout/thought_mi") == "falls"
    assert [(x, round(m, 3)) for x, m, _ in findings.windows(rows, "rollout/thought_mi")] == [(5.5, 0.3), (15.5, 0.05)]
    flat = [{"iteration": i, "rollout/thought_mi": 0.2 + 0.1 * (i % 2)} for i in range(1, 21)]
    assert findings.trend(flat, "rollout/thought_mi") == "flat" and findings.trend(flat[:1], "x") is None


def test_thoughts_that_name_another_action_than_the_one_answered(tmp_path):
    # the Bandit, kept without answers: known only at an evaluation that scored 1.000 (every answer Dragon, the high
    # arm). At 10: "choose Phoenix" points elsewhere; Dragon alone, both arms and no arm do not. At 0 (0.5): unknown
    bandit = config_of(0, **{"env.name": "bandit", "env.max_turns": 1})
    folder = write_run(tmp_path, "bandit-starpo-s-seed0", {0: 0.5, 10: 1.0}, bandit)
    (folder / "thoughts.json").write_text(json.dumps({
        "Evaluation at iteration 0": {"1": ["I will choose Phoenix."]},
        "Evaluation at iteration 10": {"1": ["I will choose Phoenix."], "2": ["Dragon it is."],
                                       "3": ["Phoenix and Dragon are arms."], "4": ["phoenix, surely"],
                                       "5": ["no arm named"]}}))
    run = findings.load(str(tmp_path), "bandit-starpo-s-seed0")
    assert findings.hallucinations(run) == {"evaluations": 1, "turns": 5, "thinking": 5, "naming": 4, "elsewhere": 2,
                                            "by_evaluation": [(10, 2, 5)]}
    # Sokoban with its answers kept: "actions left" is the count of actions, not the direction Left
    folder = write_run(tmp_path, "sokoban-starpo-s-seed0", {0: 0.2, 10: 0.2})
    (folder / "thoughts.json").write_text(json.dumps({"Evaluation at iteration 10": {
        "1": ["I go left.", "You have 9 actions left.", "Up, then Left.", "#####", " "]}}))
    (folder / "answers.json").write_text(json.dumps({"Evaluation at iteration 10": {
        "1": [["Right"], ["Up"], ["Left"], ["Down"], ["Up"]]}}))
    run = findings.load(str(tmp_path), "sokoban-starpo-s-seed0")
    # the fifth turn's think block is empty: a turn, but no thought
    assert findings.hallucinations(run) == {"evaluations": 1, "turns": 5, "thinking": 4, "naming": 2, "elsewhere": 1,
                                            "by_evaluation": [(10, 1, 5)]}
    # phrases with a direction word that name no move, each answered otherwise: none names an action; the
    # same words as moves do ("Pick up the box, then go Down." names Down, answered Up: elsewhere)
    folder = write_run(tmp_path, "sokoban-starpo-s-seed1", {0: 0.2, 10: 0.2})
    idioms = ["You should pick up the box.", "Let's break it down step by step.", "Picking up speed.",
              "You can make up to 10 actions.", "Breaking down the puzzle helps.", "Mind the right-hand wall."]
    (folder / "thoughts.json").write_text(json.dumps({"Evaluation at iteration 10": {
        "1": [*idioms, "Pick up the box, then go Down.", "Push it up."]}}))
    (folder / "answers.json").write_text(json.dumps({"Evaluation at iteration 10": {
        "1": [["Down"], ["Left"], ["Right"], ["Left"], ["Up"], ["Left"], ["Up"], ["Up"]]}}))
    assert findings.hallucinations(findings.load(str(tmp_path), "sokoban-starpo-s-seed1")) == {
        "evaluations": 1, "turns": 8, "thinking": 8, "naming": 2, "elsewhere": 1, "by_evaluation": [(10, 1, 8)]}
    # reasoning off, or no thoughts kept: nothing to count
    folder = write_run(tmp_path, "bandit-no-think-seed0", {0: 0.5, 10: 1.0}, {**bandit, "rollout": {"think": False}})
    assert findings.hallucinations(findings.load(str(tmp_path), "bandit-no-think-seed0")) is None


def test_a_kept_run_under_its_older_name_is_read_as_seed_0_of_its_arm(tmp_path):
    write_run(tmp_path, "sokoban-n4", {0: 0.2, 20: 0.3}, config_of(0))
    assert findings.folder(str(tmp_path), "sokoban-n4-seed0") == str(tmp_path / "sokoban-n4")
    assert [run.name for run in findings.arm_runs(str(tmp_path), "64 prompts x 4")] == ["sokoban-n4"]
    write_run(tmp_path, "sokoban-n4-seed0", {0: 0.2, 20: 0.3}, config_of(0))  # a run of the protocol comes first
    assert findings.folder(str(tmp_path), "sokoban-n4-seed0") == str(tmp_path / "sokoban-n4-seed0")


# ======================================================================================================
# The protocol: what `findings.py all` starts
# ======================================================================================================
SOKOBAN_ARMS = ["starpo-s", "ppo", "grpo", "grpo-filter0.25", "grpo-filter0.5", "grpo-filter0.25-minibatch8",
                "starpo-s-with-kl", "starpo-s-no-clip-higher", "no-think", "5-actions-per-turn"]
SHORT_ARMS = ["frozenlake-starpo-s", "frozenlake-no-think", "bandit-starpo-s", "bandit-no-think"]


def test_the_protocol_runs_three_seeds_of_every_arm_at_one_budget_per_comparison():
    expected = {f"sokoban-{arm}-seed{s}" for arm in SOKOBAN_ARMS for s in (0, 1, 2)} | {
        f"{arm}-seed{s}" for arm in SHORT_ARMS for s in (0, 1, 2)} | {"sokoban-n4-seed0", "sokoban-n16-seed0"}
    assert set(findings.RUNS) == expected and len(findings.RUNS) == 44
    for name, (preset, overrides) in findings.RUNS.items():
        cfg = config.load_config(preset, overrides)  # every key exists and every value is valid
        assert cfg["seed"] == int(name[-1])
        assert cfg["train"]["iterations"] == (200 if name.startswith("sokoban") else 100), name
        assert (cfg["train"]["time_limit_min"], cfg["eval"]["every"], cfg["algo"]["micro_batch_tokens"]) == (
            0, 10, 32768), name
        assert cfg["env"]["name"] == name.split("-")[0]
        assert cfg["rollout"]["think"] == ("no-think" not in name)
        grpo = "grpo" in name
        assert cfg["algo"]["estimator"] == ("grpo" if grpo else "gae")
        if grpo or "-ppo-" in name:  # vanilla: a KL term and the symmetric clip
            assert (cfg["algo"]["kl_coef"], cfg["algo"]["clip_high"]) == (0.001, 0.2)
    # the control takes as many optimiser steps as unfiltered GRPO: 8 of 32 groups x 8 = 64 trajectories in
    # mini-batches of 8, against 256 in mini-batches of 32
    steps = {}
    for arm in ("grpo", "grpo-filter0.25", "grpo-filter0.25-minibatch8"):
        cfg = config.load_config(*findings.RUNS[f"sokoban-{arm}-seed0"])
        kept = int(cfg["algo"]["filter_ratio"] * cfg["rollout"]["groups"]) * cfg["rollout"]["group_size"]
        steps[arm] = kept / cfg["algo"]["mini_batch_size"]
    assert steps == {"grpo": 8, "grpo-filter0.25": 2, "grpo-filter0.25-minibatch8": 8}


def test_all_with_dry_run_lists_every_run_in_order_and_starts_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(findings.subprocess, "Popen", lambda *a, **k: pytest.fail("a run was started"))
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "sokoban-ppo-seed1").mkdir()
    (runs / "sokoban-ppo-seed1.done").touch()
    assert findings.main(["all", "--dry-run", "--runs", str(runs)]) is None
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "done already: sokoban-ppo-seed1"
    started = [line.split()[2] for line in out if line.startswith("would start")]
    assert started == [n for n in findings.RUNS if n != "sokoban-ppo-seed1"]
    # no GPU here: one at a time, so the first run starts at once and the others as runs end
    assert [line.split("(")[1].split(";")[0] for line in out if line.startswith("would start")][:2] == [
        "at once", "when a run ends"]
    # 43 runs: 29 of 200 iterations on Sokoban (32 less the done one), 12 of 100 on FrozenLake and the Bandit
    assert out[-1] == "43 runs to start, 7,400 iterations in all, 1 at a time"
    assert sorted(p.name for p in runs.iterdir()) == ["sokoban-ppo-seed1", "sokoban-ppo-seed1.done"]
    line = next(line for line in out if "would start sokoban-grpo-filter0.25-minibatch8-seed2" in line)
    assert line.endswith("algo.mini_batch_size=8 algo.micro_batch_size=8 "
                         f"run_dir={runs / 'sokoban-grpo-filter0.25-minibatch8-seed2'}")


def test_a_run_needs_its_arms_largest_measured_peak_and_margin(tmp_path, monkeypatch):
    """need_gib: the largest peak of any seed's run of the arm, in the protocol's folder or among the kept runs,
    plus the margin; an arm with no measured run gets RUN_GIB. Here 40.5 and 47.25 GiB (seeds 0, 2) -> 49.3 (up)."""
    monkeypatch.setattr(findings, "RUN_GIB", 60)
    runs, kept = tmp_path / "runs", tmp_path / "kept"
    write_run(runs, "sokoban-starpo-s-seed0", {}, rows=[{"iteration": 1, findings.PEAK_KEY: 40.5},
                                                         {"iteration": 2, findings.PEAK_KEY: 38.0}])
    write_run(kept, "sokoban-starpo-s-seed2", {}, rows=[{"iteration": 1, findings.PEAK_KEY: 47.25}])
    write_run(kept, "sokoban-starpo-s-with-kl", {}, config_of(0),  # another arm
              rows=[{"iteration": 1, findings.PEAK_KEY: 90.0}])
    write_run(kept, "sokoban-ppo-seed0", {10: 0.2})  # no peak logged
    folders = [str(runs), str(kept)]
    assert findings.MARGIN_GIB == 2 and findings.need_gib("sokoban-starpo-s-seed1", folders) == 49.3
    assert findings.need_gib("sokoban-starpo-s-with-kl-seed1", folders) == 92.0  # the kept run's old name
    assert findings.need_gib("sokoban-ppo-seed1", folders) == 60
    assert findings.need_gib("bandit-no-think-seed0", [str(tmp_path / "none")]) == 60


def test_runs_are_placed_where_most_room_is_left_and_a_number_the_gpus_cannot_hold_is_refused():
    """place: the GPU with the most room left that holds the run; at_once_limit: auto packs by memory (no count),
    a number is kept when its largest runs fit together (first the largest, each where most room is left) and
    refused with the numbers when not; a run no GPU holds alone is refused; no GPU: one at a time."""
    assert findings.place(50.2, [139.0, 139.0], [0.0, 0.0]) == 0
    assert findings.place(50.2, [139.0, 139.0], [50.2, 0.0]) == 1
    assert findings.place(50.2, [139.0, 139.0], [100.4, 100.4]) is None
    assert findings.place(37.3, [139.0, 139.0], [100.4, 100.4]) == 0  # a light run fills the room left
    three = {"sokoban-starpo-s-seed0": 50.2, "sokoban-grpo-seed0": 56, "frozenlake-no-think-seed0": 37.3}
    assert findings.at_once_limit("auto", three, [139.0]) == math.inf
    assert findings.at_once_limit("2", three, [139.0]) == 2  # 56 + 50.2 fit
    assert findings.at_once_limit("4", {f"r{i}": 56 for i in range(4)}, [139.0, 139.0]) == 4  # two on each GPU
    with pytest.raises(SystemExit, match=r"--parallel 3: the 3 largest .* 56 \+ 50.2 \+ 37.3 GiB, and the GPUs "
                                         r"have 139.0 GiB free: at most 2 at once"):
        findings.at_once_limit("3", three, [139.0])
    with pytest.raises(SystemExit, match=r"error: sokoban-grpo-seed0 may reserve 56 GiB .* the GPUs have 40.0, "
                                         r"30.0 GiB free"):
        findings.at_once_limit("auto", {"bandit-no-think-seed0": 30, "sokoban-grpo-seed0": 56}, [40.0, 30.0])
    assert findings.at_once_limit("auto", three, None) == 1 and findings.at_once_limit("4", three, None) == 4


def test_each_run_gets_the_gpu_it_was_placed_on(monkeypatch):
    """CUDA_VISIBLE_DEVICES of a run: the entry of the variable the user set (ids or UUIDs), else the index."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert findings.device_names(2) == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, GPU-ab12")
    assert findings.device_names(2) == ["3", "GPU-ab12"]


@pytest.mark.slow
def test_run_all_packs_the_runs_onto_the_gpus_by_their_needs(tmp_path, monkeypatch, capsys):
    """Two GPUs of 100 GiB, runs of 60 GiB (no measured peak: RUN_GIB): one on each GPU at a time, never two on
    one; each run sees only its own GPU. The fake run records its CUDA_VISIBLE_DEVICES and how many runs were
    going when it started and ended (a file per running run)."""
    monkeypatch.setattr(findings, "RUN_GIB", 60)
    monkeypatch.setattr(findings, "KEPT", str(tmp_path / "kept"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    live = tmp_path / "live"
    live.mkdir()
    script = ("import json, os, sys, time; d = sys.argv[1].split('=', 1)[1]; me = os.path.join(sys.argv[2], "
              "os.path.basename(d)); open(me, 'w').close(); seen = len(os.listdir(sys.argv[2])); time.sleep(0.5); "
              "json.dump({'gpu': os.environ['CUDA_VISIBLE_DEVICES'], 'seen': max(seen, len(os.listdir(sys.argv[2])))}, "
              "open(os.path.join(d, 'what.json'), 'w')); os.remove(me)")
    monkeypatch.setattr(findings, "command",
                        lambda name, run_dir, extra: [sys.executable, "-c", script, f"run_dir={run_dir}", str(live)])
    monkeypatch.setattr(findings.time, "sleep", lambda seconds: None)
    runs = tmp_path / "runs"
    findings.run_all(["a", "b", "c", "d"], str(runs), "auto", free=[100.0, 100.0])
    what = {name: json.loads((runs / name / "what.json").read_text()) for name in "abcd"}
    assert [what[n]["gpu"] for n in "ab"] == ["0", "1"] and {what[n]["gpu"] for n in "cd"} <= {"0", "1"}
    assert max(w["seen"] for w in what.values()) <= 2  # never more than one a GPU
    assert all(findings.done(str(runs / n)) for n in "abcd")
    out = capsys.readouterr().out
    assert "started a on GPU 0 (60 GiB)" in out and "started b on GPU 1 (60 GiB)" in out


def test_a_dry_run_shows_where_each_first_run_goes(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(findings, "RUN_GIB", 60)
    monkeypatch.setattr(findings, "KEPT", str(tmp_path / "kept"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(findings.subprocess, "Popen", lambda *a, **k: pytest.fail("a run was started"))
    names = ["sokoban-grpo-seed0", "sokoban-grpo-seed1", "sokoban-grpo-seed2", "bandit-no-think-seed0"]
    findings.run_all(names, str(tmp_path / "runs"), "auto", dry_run=True, free=[139.0, 100.0])
    out = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()]
    assert out == ["would start sokoban-grpo-seed0 (at once on GPU 0; 60 GiB)",
                   "would start sokoban-grpo-seed1 (at once on GPU 1; 60 GiB)",
                   "would start sokoban-grpo-seed2 (at once on GPU 0; 60 GiB)",
                   "would start bandit-no-think-seed0 (when a run ends; 60 GiB)",
                   "4 runs to start, 700 iterations in all, as many as the GPUs' free memory holds at a time"]


def test_a_parallel_the_card_cannot_hold_starts_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(findings.subprocess, "Popen", lambda *a, **k: pytest.fail("a run was started"))
    monkeypatch.setattr(findings, "free_gpu_gib", lambda: [79.2])
    runs = tmp_path / "runs"
    with pytest.raises(SystemExit, match="at most 1 at once"):
        findings.main(["1", "--runs", str(runs), "--parallel", "2"])
    assert not runs.exists()
    for bad in ("0", "two", "-1"):
        with pytest.raises(SystemExit):
            findings.main(["1", "--runs", str(runs), "--parallel", bad])
        assert "give a number of runs, at least 1, or auto" in capsys.readouterr().err


@pytest.mark.slow
def test_the_free_memory_query_answers_from_a_child_process():
    """The real query (the fixture above stands in for it elsewhere): None on a machine without a GPU, such as
    CI's; the free GiB, more than 0 and less than the card's total, on one with a GPU."""
    import torch
    free = REAL_FREE_GPU_GIB()
    if torch.cuda.is_available():
        assert len(free) == torch.cuda.device_count()
        assert all(0 < f <= torch.cuda.get_device_properties(i).total_memory / 2**30 for i, f in enumerate(free))
    else:
        assert free is None
