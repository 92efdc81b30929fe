"""Tests of envs.py. Each property is checked against a computation written here, from the rendered
text, never against the module's own helpers (a shared bug would otherwise pass), or against stored numbers:
tests/fixtures/envs.json holds shortest solutions of the generator's puzzles and RAGEN's regular expression's
reading of varied replies, made once by independent references (a breadth-first search, the regular expression)
that stay out of the student copy (course/hidden/make_fixtures.py): Sokoban's moves and the parser are exercises."""
import copy
import json
import random
import string
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import envs  # noqa: E402
from envs import make_env, parse_answer  # noqa: E402

DELTAS = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}
FIXTURE = json.loads((Path(__file__).resolve().parent / "fixtures" / "envs.json").read_text())


# ---- an independent Sokoban model built from the text alone --------------------------------------
def parse_sokoban(text):
    walls, targets, boxes, player = set(), set(), set(), None
    for r, line in enumerate(text.split("\n")):
        for c, ch in enumerate(line):
            if ch == "#":
                walls.add((r, c))
            if ch in "O√S":
                targets.add((r, c))
            if ch in "X√":
                boxes.add((r, c))
            if ch in "PS":
                assert player is None, "two players"
                player = (r, c)
    return walls, frozenset(targets), frozenset(boxes), player


# ---- make_env and the common API ------------------------------------------------------------------
def test_make_env_errors():
    with pytest.raises(ValueError, match="bandit.*sokoban.*frozenlake"):
        make_env("chess")
    with pytest.raises((TypeError, ValueError), match="dim_rom.*dim_room"):
        make_env("sokoban", dim_rom=6)
    with pytest.raises((TypeError, ValueError), match="slippery"):
        make_env("frozenlake", slippery=False)


@pytest.mark.parametrize("name,actions", [("sokoban", ["Up", "Down", "Left", "Right"]),
                                          ("frozenlake", ["Left", "Down", "Right", "Up"]),
                                          ("bandit", None)])
def test_common_api(name, actions):
    env = make_env(name)
    # the paper's task text; Bandit's is empty, its state text (below) holds the task
    assert isinstance(env.instruction, str) and (len(env.instruction) > 40) == (name != "bandit")
    assert isinstance(env.symbols, dict)
    with pytest.raises(RuntimeError):
        env.step(env.actions[0])  # before reset
    obs, info = env.reset(seed=3)
    assert obs == env.render() and info == {"success": False}
    if name == "bandit":
        assert obs.startswith("You are playing a bandit game.") and obs.count(env.actions[0]) == obs.count(env.actions[1]) == 3
    if actions is not None:
        assert env.actions == actions and env.max_actions == 10
        assert set(obs) - {"\n"} <= set(env.symbols)  # the grid uses only the documented symbols
    else:
        assert sorted(env.actions) == ["Dragon", "Phoenix"] and env.symbols == {} and env.max_actions == 1
    with pytest.raises(ValueError, match="valid actions"):
        env.step("Jump")
    steps = 0
    while True:
        obs, reward, terminated, truncated, info = env.step(env.actions[steps % 2])
        steps += 1
        assert obs == env.render() and isinstance(info["success"], bool) and isinstance(info["effective"], bool)
        if terminated or truncated:
            break
    assert steps <= env.max_actions and (terminated or steps == env.max_actions)
    with pytest.raises(RuntimeError):
        env.step(env.actions[0])


def test_action_budget_truncates():
    env = make_env("sokoban", max_actions=3)
    env.reset(grid="#######\n#P_X_O#\n#######")
    results = [env.step("Left") for _ in range(3)]  # bumping into the wall, three times
    assert [r[2:4] for r in results] == [(False, False), (False, False), (False, True)]
    assert all(r[1] == pytest.approx(-0.1) and not r[4]["effective"] for r in results)


# ---- Sokoban ------------------------------------------------------------------------------------
def replay(env, path):
    """Plays a stored solution ("Up Left ..."); -> (return, every step's (terminated, success))."""
    steps = [env.step(a) for a in path.split()]
    return sum(s[1] for s in steps), [(s[2], s[4]["success"]) for s in steps]


def test_sokoban_500_seeds_solvable_within_budget():
    """The generator's puzzles are the stored ones, and their stored shortest solutions (a breadth-first search)
    fit the 10-action budget, as long as the paper's on average."""
    stored = FIXTURE["sokoban_6x6"]
    assert stored["seeds"] == list(range(500))
    for seed, puzzle in zip(stored["seeds"], stored["puzzles"]):
        obs, _ = make_env("sokoban").reset(seed)
        rows = obs.split("\n")
        assert len(rows) == 6 and all(len(r) == 6 for r in rows)
        assert rows[0] == rows[-1] == "######" and all(r[0] == r[-1] == "#" for r in rows)
        walls, targets, boxes, player = parse_sokoban(obs)
        assert len(boxes) == len(targets) == 1 and player is not None and not boxes <= targets
        assert obs == puzzle, f"seed {seed}: the generator changed; run python course/hidden/make_fixtures.py"
    lengths = [len(path.split()) for path in stored["paths"]]
    assert max(lengths) <= 10
    mean = sum(lengths) / len(lengths)
    print(f"\noptimal lengths over 500 seeds: mean {mean:.2f} (paper 3.95), "
          f"<=5: {sum(k <= 5 for k in lengths) / 500:.1%} (paper 77.7%), "
          f"distribution {sorted(Counter(lengths).items())}")
    assert 3.0 < mean < 5.0 and sum(k <= 5 for k in lengths) / 500 > 0.6


def test_sokoban_replaying_a_shortest_solution_gives_paper_return():
    """A stored shortest solution solves its puzzle on its last move, not before: a one-box solve in k moves
    returns 10 + 1 (box on target) - 0.1 k."""
    stored = FIXTURE["sokoban_6x6"]
    for seed, path in zip(stored["seeds"][:100], stored["paths"]):
        env = make_env("sokoban")
        env.reset(seed)
        total, ends = replay(env, path)
        k = len(ends)
        assert ends == [(False, False)] * (k - 1) + [(True, True)], (seed, path, ends)
        assert total == pytest.approx(11 - 0.1 * k), seed


def test_sokoban_8x8_two_boxes():
    stored = FIXTURE["sokoban_8x8_two_boxes"]
    for seed, puzzle, path in zip(stored["seeds"], stored["puzzles"], stored["paths"]):
        env = make_env("sokoban", dim_room=8, num_boxes=2)
        obs, _ = env.reset(seed)
        walls, targets, boxes, player = parse_sokoban(obs)
        assert len(obs.split("\n")) == 8 and len(boxes) == len(targets) == 2 and obs == puzzle
        total, ends = replay(env, path)
        assert len(ends) <= 10 and ends[-1] == (True, True) and not any(done for done, _ in ends[:-1]), seed
        assert total == pytest.approx(10 + 2 - 0.1 * len(ends))  # two boxes onto targets, none pushed off


@pytest.mark.parametrize("grid,action,expected,reward,effective,solved", [
    # walking onto free floor
    ("#####\n#P__#\n#X_O#\n#####", "Right", "#####\n#_P_#\n#X_O#\n#####", -0.1, True, False),
    # into a wall: nothing moves, and it still costs 0.1
    ("#####\n#P__#\n#X_O#\n#####", "Up", "#####\n#P__#\n#X_O#\n#####", -0.1, False, False),
    # a box into a wall
    ("####\n#PX#\n#_O#\n####", "Right", "####\n#PX#\n#_O#\n####", -0.1, False, False),
    # a box into another box
    ("######\n#PXX_#\n#_OO_#\n######", "Right", "######\n#PXX_#\n#_OO_#\n######", -0.1, False, False),
    # a box onto a target (one of two boxes: +1, not solved)
    ("######\n#PXO_#\n#_XO_#\n######", "Right", "######\n#_P√_#\n#_XO_#\n######", 0.9, True, False),
    # a box off a target: -1; the player now stands on the target
    ("######\n#P√__#\n#_XO_#\n######", "Right", "######\n#_SX_#\n#_XO_#\n######", -1.1, True, False),
    # from one target onto the next: -1 +1
    ("######\n#P√O_#\n#_X__#\n######", "Right", "######\n#_S√_#\n#_X__#\n######", -0.1, True, False),
    # the player walks over a target
    ("#####\n#PO_#\n#_X_#\n#####", "Right", "#####\n#_S_#\n#_X_#\n#####", -0.1, True, False),
    # the last box onto its target: +1 +10, the episode ends
    ("######\n#PXO_#\n#__√_#\n######", "Right", "######\n#_P√_#\n#__√_#\n######", 10.9, True, True),
])
def test_sokoban_push_rules(grid, action, expected, reward, effective, solved):
    env = make_env("sokoban")
    env.reset(grid=grid)
    assert env.render() == grid
    obs, r, terminated, truncated, info = env.step(action)
    assert obs == expected and r == pytest.approx(reward)
    assert info["effective"] == effective and terminated == info["success"] == solved and not truncated


# ---- FrozenLake -----------------------------------------------------------------------------------
def lake_cells(text):
    return {(r, c): ch for r, line in enumerate(text.split("\n")) for c, ch in enumerate(line)}


def test_frozenlake_maps():
    holes, distances, corner_starts = [], [], 0
    for seed in range(256):
        cells = lake_cells(make_env("frozenlake").reset(seed)[0])
        assert len(cells) == 16 and set(cells.values()) <= set("P_OG")
        (start,) = [k for k, v in cells.items() if v == "P"]
        (goal,) = [k for k, v in cells.items() if v == "G"]
        reached, queue = {start}, [start]  # the goal is reachable without entering a hole
        while queue:
            r, c = queue.pop()
            for dr, dc in DELTAS.values():
                nxt = (r + dr, c + dc)
                if cells.get(nxt, "O") != "O" and nxt not in reached:
                    reached.add(nxt)
                    queue.append(nxt)
        assert goal in reached
        holes.append(sum(v == "O" for v in cells.values()))
        distances.append(abs(start[0] - goal[0]) + abs(start[1] - goal[1]))
        corner_starts += start in {(0, 0), (0, 3), (3, 0), (3, 3)}
    mean_holes, mean_dist = sum(holes) / 256, sum(distances) / 256
    print(f"\nFrozenLake 256 maps: {mean_holes:.2f} holes (paper 2.92), start-goal distance "
          f"{mean_dist:.2f} (paper 2.60), starts in a corner {corner_starts / 256:.0%}")
    assert 2.3 < mean_holes < 3.5 and 2.1 < mean_dist < 3.1 and corner_starts < 128


def test_frozenlake_slip_frequencies():
    # From the middle of an open lake, classify each move by its direction relative to the action.
    grid = "____\n_P__\n____\n___G"
    perpendicular = {"Left": ("Up", "Down"), "Right": ("Down", "Up"), "Up": ("Right", "Left"),
                     "Down": ("Left", "Right")}
    counts, n = Counter(), 12000
    env = make_env("frozenlake")
    for seed in range(n):
        env.reset(seed=seed, grid=grid)
        action = ["Left", "Down", "Right", "Up"][seed % 4]
        obs = env.step(action)[0]
        (pos,) = [k for k, v in lake_cells(obs).items() if v == "P"]
        moved = {DELTAS[a]: a for a in DELTAS}[(pos[0] - 1, pos[1] - 1)]
        kind = ("intended" if moved == action else "perp1" if moved == perpendicular[action][0]
                else "perp2" if moved == perpendicular[action][1] else "opposite")
        counts[kind] += 1
    print(f"\nslips over {n} seeds: { {k: round(v / n, 4) for k, v in counts.items()} }")
    assert counts["opposite"] == 0
    for kind in ("intended", "perp1", "perp2"):
        assert abs(counts[kind] / n - 1 / 3) < 0.02


def test_frozenlake_not_slippery_border_hole_goal():
    env = make_env("frozenlake", is_slippery=False, max_actions=3)
    env.reset(seed=0, grid="P___\n____\n_O__\n___G")
    assert env.step("Up")[1:] == (0.0, False, False, {"success": False, "effective": False})  # border
    obs, reward, terminated, truncated, info = env.step("Down")
    assert obs == "____\nP___\n_O__\n___G" and info["effective"]
    assert env.step("Down")[2:4] == (False, True)  # third action: the budget is used up
    env.reset(seed=0, grid="P___\n____\n_O__\n___G")
    env.step("Down"), env.step("Right")
    obs, reward, terminated, truncated, info = env.step("Down")
    assert obs == "____\n____\n_X__\n___G" and (reward, terminated, info["success"]) == (0.0, True, False)
    env.reset(seed=0, grid="____\n____\n____\n__PG")
    obs, reward, terminated, truncated, info = env.step("Right")
    assert obs == "____\n____\n____\n___√" and (reward, terminated, info["success"]) == (1.0, True, True)


# ---- Bandit ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,high,low", [({}, "Dragon", "Phoenix"),
                                              ({"high_name": "Phoenix", "low_name": "Dragon"}, "Phoenix", "Dragon"),
                                              ({"high_name": "Teacher", "low_name": "Engineer",
                                                "low_payout": 0.15}, "Teacher", "Engineer")])
def test_bandit_payouts(kwargs, high, low):
    env, n = make_env("bandit", **kwargs), 8000
    high_first, high_paid = 0, Counter()
    for seed in range(n):
        obs, _ = env.reset(seed)
        assert sorted(env.actions) == sorted([high, low]) and obs.index(env.actions[0]) < obs.index(env.actions[1])
        high_first += env.actions[0] == high
        obs, reward, terminated, truncated, info = env.step(high if seed % 2 else low)
        assert terminated and not truncated and info["success"] == bool(seed % 2)
        if seed % 2:
            high_paid[reward] += 1
        else:
            assert reward == kwargs.get("low_payout", 0.1)
    assert abs(high_first / n - 0.5) < 0.03
    assert set(high_paid) == {0.0, 1.0} and abs(high_paid[1.0] / (n // 2) - 0.25) < 0.03


# ---- reproducibility and variety ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bandit", "sokoban", "frozenlake"])
def test_same_seed_same_trajectory(name):
    rng = random.Random(0)
    differing = 0
    for seed in range(30):
        env = make_env(name)
        actions = [rng.choice(env.actions) for _ in range(10)]
        runs = []
        for reseed in (seed, seed, seed + 1000):
            trajectory = [env.reset(reseed)]
            for a in actions:
                a = a if a in env.actions else env.actions[0]
                trajectory.append(env.step(a))
                if trajectory[-1][2] or trajectory[-1][3]:
                    break
            runs.append(trajectory)
        assert runs[0] == runs[1]
        differing += runs[0] != runs[2]
    assert differing > 10


@pytest.mark.parametrize("name", ["sokoban", "frozenlake"])
def test_spaced_grid_is_the_same_game_with_a_space_between_cells(name):
    """spaced_grid changes only the text: the same seed and actions give the same rewards and ends, and each
    observation is the plain grid with one space put between neighbouring cells (typed out for one grid)."""
    plain, spaced = make_env(name), make_env(name, spaced_grid=True)
    rng = random.Random(1)
    for seed in range(20):
        observations = [(plain.reset(seed)[0], spaced.reset(seed)[0])]
        for _ in range(10):
            action = rng.choice(plain.actions)
            a, b = plain.step(action), spaced.step(action)
            assert a[1:] == b[1:]
            observations.append((a[0], b[0]))
            if a[2] or a[3]:
                break
        for text, spaced_text in observations:
            rows = []
            for row in text.split("\n"):
                cells = ""
                for ch in row:
                    cells += (" " if cells else "") + ch
                rows.append(cells)
            assert spaced_text == "\n".join(rows)
    hand = "#####\n#P_O#\n#_X_#\n#####" if name == "sokoban" else "P_\nOG"
    spaced.reset(0, grid=hand)
    assert spaced.render() == ("# # # # #\n# P _ O #\n# _ X _ #\n# # # # #" if name == "sokoban" else "P _\nO G")


@pytest.mark.parametrize("name", ["bandit", "sokoban", "frozenlake"])
def test_copy_env_plays_like_a_deep_copy_and_apart_from_the_original(name):
    """Copies taken mid-episode give, step for step, what copy.deepcopy's copies give (same slips and
    payouts: the random state is copied), and playing one copy leaves the original and the others as
    they were."""
    rng = random.Random(2)
    for seed in range(40):
        env = make_env(name)
        env.reset(seed)
        if name != "bandit":
            env.step(rng.choice(env.actions))
        if env.done:
            continue
        twin, reference, before = envs.copy_env(env), copy.deepcopy(env), copy.deepcopy(env)
        actions = [rng.choice(env.actions) for _ in range(8)]
        played = []
        for copy_ in (twin, reference):
            outcomes = []
            for action in actions:
                outcomes.append(copy_.step(action))
                if outcomes[-1][2] or outcomes[-1][3]:
                    break
            played.append(outcomes)
        assert played[0] == played[1]
        for action in actions:  # the original plays on as if no copy had moved (its slips, its payout)
            assert env.step(action) == before.step(action)
            if env.done:
                break


@pytest.mark.parametrize("name", ["sokoban", "frozenlake"])
def test_256_seeds_give_distinct_maps(name):
    env = make_env(name)
    assert len({env.reset(seed)[0] for seed in range(256)}) >= 200


# ---- the answer parser ----------------------------------------------------------------------------
MOVES = ["Up", "Down", "Left", "Right"]
PARSER_CASES = [  # text, expected actions, format_ok, think
    ("<think>go up</think><answer>Up</answer>", ["Up"], True, "go up"),
    ("<think>x</think> <answer>Up || Left || down</answer>", ["Up", "Left", "Down"], True, "x"),
    ("<think>t</think><answer> RIGHT||lEfT </answer>", ["Right", "Left"], True, "t"),
    ("<answer>Up</answer>", [], False, ""),                                       # no think
    ("<think>a</think><answer>Up", [], False, ""),                                # unclosed answer
    ("Up", [], False, ""),                                                        # no tags at all
    ("Sure!\n<think>a</think>\n\n<answer>Up</answer> Done.", ["Up"], True, "a"),  # text around
    ("<think>a</think> so <answer>Up</answer>", [], False, ""),                   # text between
    ("<think></think><answer>Up||Up||Up||Up||Up||Up||Up</answer>", ["Up"] * 5, True, ""),  # too many
    ("<think></think><answer>Up||Up||Up||Up||Up||Jump</answer>", ["Up"] * 5, True, ""),  # 6th dropped
    ("<think>b</think><answer>Up || Jump</answer>", ["Up"], False, "b"),           # one invalid
    ("<think>b</think><answer>Jump</answer>", [], False, "b"),
    ("<think>a</think><answer></answer>", [], False, "a"),                        # empty answer
    ("<think>a</think><answer>  \n </answer>", [], False, "a"),
    ("<think>a</think><answer>Up ||</answer>", ["Up"], True, "a"),                # trailing ||
    ("<think>a</think><answer>Up |||| Down</answer>", ["Up", "Down"], True, "a"),  # empty piece
    ("<think>a</think><answer>Up | Down</answer>", [], False, "a"),               # single bar
    ("<think>a</think><answer>Up, Down</answer>", [], False, "a"),                # commas
    ("<think>a <think>b</think></think><answer>Up</answer>", ["Up"], True, "a <think>b</think>"),  # nested
    ("<think>a</think><answer>Up</answer><think>b</think><answer>Down</answer>", ["Up"], True, "a"),  # repeated
    ("<think>a</think><answer>Up<answer>Down</answer>", [], False, "a"),          # nested answer
    ("<answer>Up</answer><think>a</think>", [], False, ""),                       # wrong order
    ("<THINK>a</THINK><ANSWER>Up</ANSWER>", [], False, ""),                       # tags are case-sensitive
    ("<think>向上走 🚀</think><answer>Up || Ｄｏｗｎ</answer>", ["Up"], False, "向上走 🚀"),  # full-width
    ("<think>line1\nline2</think>\n<answer>\nLeft\n</answer>", ["Left"], True, "line1\nline2"),
    ("<think>é</think><answer>\u00a0Right\u2003</answer>", ["Right"], True, "é"),  # unicode spaces
]


@pytest.mark.parametrize("text,actions,format_ok,think", PARSER_CASES)
def test_parse_answer_cases(text, actions, format_ok, think):
    parsed = parse_answer(text, MOVES, 5)
    assert (parsed.think, parsed.actions, parsed.format_ok) == (think, actions, format_ok)


def test_parse_answer_no_think_and_bandit():
    assert parse_answer("<answer>Up</answer><think>a</think>", MOVES, 5, require_think=False) == ("", ["Up"], True)
    assert parse_answer("<answer> left </answer>", MOVES, 5, require_think=False) == ("", ["Left"], True)
    arms = ["Phoenix", "Dragon"]
    assert parse_answer("<think>risky</think><answer>dragon</answer>", arms, 1) == ("risky", ["Dragon"], True)
    assert parse_answer("<think></think><answer>Dragon || Phoenix</answer>", arms, 1).actions == ["Dragon"]


def test_parse_answer_never_raises():
    rng = random.Random(0)
    atoms = ["<think>", "</think>", "<answer>", "</answer>", "||", "|", "Up", "down", "LEFT", "Right",
             " ", "\n", "<", ">", "/", "é", "🚀", "\u00a0", "\x00", "\\", "(.*?)", "[", "$"]
    alphabet = string.printable + "éü中🚀\u200b\u00a0"
    for i in range(10000):
        if i % 2:
            text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 30)))
        else:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        parsed = parse_answer(text, MOVES, rng.randint(1, 5), require_think=bool(i % 3))
        assert set(parsed.actions) <= set(MOVES) and len(parsed.actions) <= 5
        assert parsed.format_ok in (True, False) and (not parsed.format_ok or parsed.actions)


def test_parse_answer_agrees_with_the_regular_expression():
    """Varied replies (pieces of tags, actions and spaces) read as RAGEN's regular expression reads them:
    `<think>(.*?)</think>\\s*<answer>(.*?)</answer>` (or the answer alone), split on "||", each piece stripped and
    matched case-insensitively, at most max_actions of them. The stored readings span every kind of outcome."""
    cases = FIXTURE["regex_parser"]
    for text, require_think, max_actions, thinking, actions, format_ok in cases:
        assert tuple(parse_answer(text, MOVES, max_actions, require_think)) == (thinking, actions, format_ok), repr(text)
    assert sum(c[5] for c in cases) > 50 and sum(not c[5] and c[4] != [] for c in cases) > 20  # kinds reached


def fastest_parse(text, require_think):
    """Seconds of the fastest of three parses of TEXT: the one a busy machine disturbed least."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        parse_answer(text, MOVES, 5, require_think)
        times.append(time.perf_counter() - started)
    return min(times)


@pytest.mark.parametrize("shape", ["<think>", "</think>", "<think></think>", "<answer>", "</think><answer>",
                                   "<think><answer>", "</think> ", "<think>Up || ", "<", "a"])
@pytest.mark.parametrize("require_think", [True, False])
def test_parse_answer_takes_linear_time(shape, require_think):
    """A reply of any repeated shape parses in time linear in its length: 4x the text takes about 4x the time
    (8x allowed, or 5 ms), where a backtracking regular expression takes 16x (and seconds on `<think>` x
    16,000). The parser is timed against itself in one test, so a busy machine slows both sizes alike. A
    closing pair at the very end is still found."""
    tail = "<think>t</think><answer>Up</answer>" if require_think else "<answer>Up</answer>"
    for end in ("", tail):
        small, large = (shape * (2 ** 14 * k // len(shape)) + end for k in (1, 4))  # 16 and 64 KB
        assert fastest_parse(large, require_think) < max(8 * fastest_parse(small, require_think), 0.005), end
    text = shape * (2 ** 18 // len(shape))
    assert parse_answer(text, MOVES, 5, require_think).format_ok is False
    # on a short piece, what RAGEN's regular expression reads (stored)
    expected = FIXTURE["long_replies"][shape][str(require_think)]
    assert list(parse_answer(text[:200] + tail, MOVES, 5, require_think)) == expected


def test_hand_written_grids():
    env = make_env("sokoban")
    assert env.reset(grid="####\n#PX#\n#_O#\n####")[0] == "####\n#PX#\n#_O#\n####"
    assert len(env.reset(seed=0)[0].split("\n")) == 6  # the generator's size is not the grid's
    with pytest.raises(ValueError):
        env.reset(grid="#####\n#P_X#\n#####")  # a box but no target
    with pytest.raises(ValueError):
        env.reset(grid="####\n#PX#\n#_O\n####")  # ragged rows
    lake = make_env("frozenlake")
    assert lake.reset(grid="P_\nOG") == ("P_\nOG", {"success": False})
    with pytest.raises(ValueError):
        lake.reset(grid="P_\nO_")  # no goal
    with pytest.raises(ValueError):
        lake.reset(grid="P#\nOG")  # not a FrozenLake symbol
