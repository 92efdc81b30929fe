"""Tests of baselines.py, each against a computation written here (a hand-worked map, Monte-Carlo simulation
through the real env, exact enumeration of the random policy on FrozenLake) or against stored numbers for Sokoban,
whose moves are an exercise: tests/fixtures/baselines.json holds the evaluation seeds' puzzles, their shortest
solution lengths and the random policy's exact chances, made once by references that stay out of the student copy
(course/hidden/make_fixtures.py: a breadth-first search and an enumeration over Sokoban's moves)."""
import json
import math
import random
import subprocess
import sys
from collections import Counter, deque
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from baselines import (evaluate, expected, frozenlake_values, play_random, random_turn_actions,  # noqa: E402
                       shortest_path_policy)
from envs import make_env  # noqa: E402

EVAL_SEEDS = [1_000_000 + i for i in range(256)]
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "baselines.json").read_text())
DELTAS = {"Left": (0, -1), "Down": (1, 0), "Right": (0, 1), "Up": (-1, 0)}
PERPENDICULAR = {"Left": ("Up", "Down"), "Right": ("Up", "Down"), "Up": ("Left", "Right"), "Down": ("Left", "Right")}


def greedy_action(env, values, cell, actions_left):
    """The optimal action at `cell` with `actions_left` actions left (values from frozenlake_values): the one
    whose expected value over its slips, with one action fewer left, is largest."""
    return max(env.actions, key=lambda a: expected(env, values[actions_left - 1], cell, a))


def binomial_at_least_two(k, p=1 / 3):
    return 1 - (1 - p) ** k - k * p * (1 - p) ** (k - 1)


def test_value_iteration_hand_worked_map():
    # P_    From the start, Right or Down risk the hole (1/3); Up cannot fall in and reaches the
    # OG    top-right cell with probability 1/3 (slipping right), where Right reaches the goal with
    #       probability 1/3 (slipping down) and otherwise stays. So the optimum with k actions is
    #       P(at least 2 successes in k trials of probability 1/3).
    env = make_env("frozenlake")
    env.reset(seed=0, grid="P_\nOG")
    values = frozenlake_values(env, 10)
    for k in (1, 2, 3, 10):
        assert values[k][(0, 0)] == pytest.approx(binomial_at_least_two(k))
    assert values[10][(1, 0)] == 0.0 and values[0][(1, 1)] == 1.0
    assert all(greedy_action(env, values, (0, 0), k) == "Up" for k in range(3, 11))  # k = 2: a tie
    assert greedy_action(env, values, (0, 1), 5) == "Right"


@pytest.mark.slow
def test_value_iteration_matches_monte_carlo_of_its_policy():
    for seed in EVAL_SEEDS[:3]:
        env = make_env("frozenlake")
        grid = env.reset(seed)[0]
        start = env.player
        values = frozenlake_values(env, 10)
        n, wins = 2000, 0
        for episode in range(n):  # fresh slips for every episode, same map
            env.reset(seed=episode, grid=grid)
            for left in range(10, 0, -1):
                *_, terminated, truncated, info = env.step(greedy_action(env, values, env.player, left))
                if terminated or truncated:
                    break
            wins += info["success"]
        p = values[10][start]
        assert abs(wins / n - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-9, (seed, wins / n, p)


def test_shortest_path_policy_hand_worked_map():
    # P_    The slip-ignoring walker goes Right at the start (Down is the hole) and Down next to the
    # OG    goal. Right from P: stay (slip up), right, or the hole (slip down), 1/3 each. Down from the
    #       top-right cell: stay (slip right into the border), the goal, or back to P (slip left).
    #       So a_k = (a + b) / 3 and b_k = 1/3 + (a + b) / 3 with k-1's a, b: a_2 = 1/9, a_3 = 5/27,
    #       below the optimum's 7/27 (the optimum first goes Up, where it cannot fall in).
    env = make_env("frozenlake")
    env.reset(seed=0, grid="P_\nOG")
    policy = shortest_path_policy(env)
    assert policy((0, 0)) == "Right" and policy((0, 1)) == "Down"
    values = frozenlake_values(env, 10, policy)
    a = b = 0.0
    for k in range(1, 11):
        a, b = (a + b) / 3, 1 / 3 + (a + b) / 3
        assert values[k][(0, 0)] == pytest.approx(a) and values[k][(0, 1)] == pytest.approx(b)
    assert values[2][(0, 0)] == pytest.approx(1 / 9) and values[3][(0, 0)] == pytest.approx(5 / 27)
    assert frozenlake_values(env, 3)[3][(0, 0)] == pytest.approx(7 / 27)  # the optimum does better
    # Ties go to the first action in env.actions (Left, Down, Right, Up): from P both Down and Right
    # lead to a cell one step from G.
    env.reset(seed=0, grid="P_\n_G")
    assert shortest_path_policy(env)((0, 0)) == "Down" and shortest_path_policy(env)((1, 0)) == "Right"


def test_shortest_path_policy_walks_a_shortest_path_and_matches_monte_carlo():
    for seed in EVAL_SEEDS[:3]:
        env = make_env("frozenlake")  # the policy is built on the slippery env, as evaluate() does
        grid = env.reset(seed)[0]
        policy, start = shortest_path_policy(env), env.player
        env = make_env("frozenlake", is_slippery=False)
        env.reset(seed=0, grid=grid)
        # Without slips its walk reaches the goal in exactly the BFS distance (a separate search here).
        distance, frontier = {start: 0}, deque([start])
        while frontier:
            r, c = frontier.popleft()
            for dr, dc in DELTAS.values():
                nxt = (r + dr, c + dc)
                inside = 0 <= nxt[0] < env.rows and 0 <= nxt[1] < env.cols
                if inside and nxt not in env.holes and nxt not in distance:
                    distance[nxt] = distance[(r, c)] + 1
                    frontier.append(nxt)
        steps = 0
        while env.player != env.goal:
            env.step(policy(env.player))
            steps += 1
        assert steps == distance[env.goal], seed
        # On slippery ice, its exact value against playing it through the real env.
        env = make_env("frozenlake")
        env.reset(seed=0, grid=grid)
        p = frozenlake_values(env, 10, policy)[10][start]
        n, wins = 2000, 0
        for episode in range(n):
            env.reset(seed=episode, grid=grid)
            for _ in range(10):
                *_, terminated, truncated, info = env.step(policy(env.player))
                if terminated or truncated:
                    break
            wins += info["success"]
        assert abs(wins / n - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-9, (seed, wins / n, p)


def test_evaluate_shortest_is_the_mean_of_the_per_seed_values():
    seeds = EVAL_SEEDS[:16]
    per_seed = []
    for seed in seeds:
        env = make_env("frozenlake")
        env.reset(seed)
        per_seed.append(frozenlake_values(env, 10, shortest_path_policy(env))[10][env.player])
    result = evaluate("frozenlake", "shortest", seeds)
    assert result["success_rate"] == result["mean_return"] == round(sum(per_seed) / len(seeds), 4)
    # The budget is min(max_actions, turns x actions per turn): 10 x 1 and 5 x 5 both give 10 actions.
    assert evaluate("frozenlake", "shortest", seeds, max_turns=10, max_actions_per_turn=1) == result
    two_actions = evaluate("frozenlake", "shortest", seeds, max_turns=2, max_actions_per_turn=1)
    assert two_actions["success_rate"] < result["success_rate"]
    with pytest.raises(ValueError, match="frozenlake only"):
        evaluate("sokoban", "shortest", seeds)
    with pytest.raises(ValueError, match="unknown policy"):
        evaluate("frozenlake", "optimum", seeds)


def horizon_distribution(max_turns=5, per_turn=5, budget=10):
    """P(the random policy gets T actions before the budget), T = min(budget, sum of turn sizes)."""
    sums = Counter({0: 1.0})
    for _ in range(max_turns):
        new = Counter()
        for s, p in sums.items():
            for k in range(1, per_turn + 1):
                new[min(budget, s + k)] += p / per_turn
        sums = new
    return sums


def test_random_policy_frozenlake_exact():
    env = make_env("frozenlake")
    for seed in EVAL_SEEDS[:2]:
        cells = {(r, c): ch for r, line in enumerate(env.reset(seed)[0].split("\n")) for c, ch in enumerate(line)}
        start = next(k for k, v in cells.items() if v == "P")

        @lru_cache(maxsize=None)
        def p_success(cell, left):  # uniform action, then the slip model written out here
            if cells[cell] == "G":
                return 1.0
            if cells[cell] == "O" or left == 0:
                return 0.0
            total = 0.0
            for action in DELTAS:
                for moved in (action, *PERPENDICULAR[action]):
                    r, c = cell[0] + DELTAS[moved][0], cell[1] + DELTAS[moved][1]
                    nxt = (r, c) if (r, c) in cells else cell
                    total += p_success(nxt, left - 1) / 12
            return total

        exact = sum(p * p_success(start, t) for t, p in horizon_distribution().items())
        rng, n = random.Random(1), 3000
        estimate = sum(play_random(env, seed, rng, 5, 5)[0] for _ in range(n)) / n
        assert abs(estimate - exact) < 4 * math.sqrt(exact * (1 - exact) / n) + 1e-9, (seed, estimate, exact)


def test_the_evaluation_seeds_give_the_stored_puzzles():
    assert FIXTURE["seeds"] == EVAL_SEEDS
    env = make_env("sokoban")
    changed = [seed for seed, puzzle in zip(EVAL_SEEDS, FIXTURE["puzzles"]) if env.reset(seed)[0] != puzzle]
    assert not changed, f"the generator changed on {changed[:5]}: run python course/hidden/make_fixtures.py"


@pytest.mark.slow
def test_random_policy_sokoban_exact():
    """The random policy's success against the exact chance: stored P(t uniform random moves solve the puzzle),
    t = 0..10, weighted by the chance of getting t actions."""
    env, checked = make_env("sokoban"), 0
    for seed, by_length in zip(EVAL_SEEDS, FIXTURE["random_success"]):
        exact = sum(p * by_length[t] for t, p in horizon_distribution().items())
        if not 0.1 < exact < 0.9:
            continue
        rng, n = random.Random(2), 3000
        estimate = sum(play_random(env, seed, rng, 5, 5)[0] for _ in range(n)) / n
        assert abs(estimate - exact) < 4 * math.sqrt(exact * (1 - exact) / n), (seed, estimate, exact)
        checked += 1
        if checked == 2:
            break
    assert checked == 2


def test_sokoban_optimal_equals_bfs():
    lengths = FIXTURE["shortest"]  # a breadth-first search's, on the stored puzzles (the test above)
    result = evaluate("sokoban", "optimal", EVAL_SEEDS)
    assert result["success_rate"] == sum(k <= 10 for k in lengths) / 256 == 1.0
    assert result["mean_return"] == pytest.approx(sum(11 - 0.1 * k for k in lengths) / 256, abs=1e-4)


def test_bandit_baselines():
    seeds = list(range(2000))
    assert evaluate("bandit", "optimal", seeds)["success_rate"] == 1.0
    # the risky arm pays 1.0 with probability 0.25: mean return of the optimal policy ~0.25
    assert abs(evaluate("bandit", "optimal", seeds)["mean_return"] - 0.25) < 0.04
    assert abs(evaluate("bandit", "random", seeds, episodes_per_seed=1)["success_rate"] - 0.5) < 0.05


def test_random_turn_actions_and_budgets():
    rng = random.Random(0)
    turns = [random_turn_actions(rng, ["a", "b", "c"], 4) for _ in range(20000)]
    lengths, picks = Counter(len(t) for t in turns), Counter(a for t in turns for a in t)
    assert sorted(lengths) == [1, 2, 3, 4] and all(abs(v / 20000 - 0.25) < 0.02 for v in lengths.values())
    assert all(abs(v / sum(picks.values()) - 1 / 3) < 0.02 for v in picks.values())
    # An episode that can never end early (only wall bumps): the budgets decide its length.
    for max_actions, max_turns, per_turn in ((10, 5, 5), (3, 5, 5), (10, 2, 2)):
        env = make_env("sokoban", max_actions=max_actions)
        env.reset = lambda seed, _reset=env.reset: _reset(grid="######\n#P#XO#\n######")  # walled in
        for _ in range(50):
            play_random(env, 0, rng, max_turns, per_turn)
            assert min(max_actions, max_turns) <= env.num_actions <= min(max_actions, max_turns * per_turn)


def test_command_line():
    out = subprocess.run([sys.executable, "baselines.py", "--env", "frozenlake", "--policy", "optimal",
                          "--num-seeds", "4"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    result = json.loads(out)
    assert result["env"] == "frozenlake" and result["num_seeds"] == 4 and 0 < result["success_rate"] <= 1
    for args, message in [(["--env", "sokoban", "--policy", "shortest"], "frozenlake only"),
                          (["--env", "frozenlake", "--policy", "random", "--num-seeds", "0"], "at least 1"),
                          (["--env", "frozenlake", "--policy", "optimal", "--env-kwargs", '{"sise": 4}'], "sise")]:
        wrong = subprocess.run([sys.executable, "baselines.py", *args], cwd=ROOT, capture_output=True, text=True)
        assert wrong.returncode == 2 and message in wrong.stderr and "Traceback" not in wrong.stderr, args
