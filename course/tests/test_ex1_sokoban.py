"""Exercise 1 (visible tests): envs.sokoban_move, Sokoban's push rules.

A state is (player, boxes): player is a (row, col) cell, boxes a set of cells. `floor` is the set of
walkable cells; every other cell is a wall. Actions are "Up", "Down", "Left", "Right".
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

sokoban_move = adapters.function("ex1-sokoban")

STEP = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}


def room(rows, cols):
    """The inside of a rows x cols room whose outer ring is wall."""
    return {(r, c) for r in range(1, rows - 1) for c in range(1, cols - 1)}


def move(floor, boxes, player, action):
    player, boxes = sokoban_move(floor, frozenset(boxes), player, action)
    return tuple(player), set(boxes)


def test_walks_onto_free_floor_in_all_four_directions():
    floor = room(5, 5)  # cells 1..3 x 1..3
    expected = {"Up": (1, 2), "Down": (3, 2), "Left": (2, 1), "Right": (2, 3)}
    for action, cell in expected.items():
        assert move(floor, set(), (2, 2), action) == (cell, set()), action


def test_walking_into_a_wall_changes_nothing():
    floor = room(4, 4)  # cells 1..2 x 1..2
    box = {(2, 2)}
    assert move(floor, box, (1, 1), "Up") == ((1, 1), box)
    assert move(floor, box, (1, 1), "Left") == ((1, 1), box)
    assert move(floor, set(), (2, 1), "Down") == ((2, 1), set())


def test_pushes_a_box_onto_free_floor():
    floor = room(3, 7)  # one corridor: row 1, columns 1..5
    assert move(floor, {(1, 3)}, (1, 2), "Right") == ((1, 3), {(1, 4)})
    assert move(floor, {(1, 3)}, (1, 4), "Left") == ((1, 3), {(1, 2)})
    floor = room(7, 3)  # a vertical corridor: column 1, rows 1..5
    assert move(floor, {(3, 1)}, (4, 1), "Up") == ((3, 1), {(2, 1)})


def test_a_box_cannot_be_pushed_into_a_wall():
    floor = room(3, 6)  # row 1, columns 1..4
    assert move(floor, {(1, 4)}, (1, 3), "Right") == ((1, 3), {(1, 4)})
    assert move(floor, {(1, 1), (1, 4)}, (1, 2), "Left") == ((1, 2), {(1, 1), (1, 4)})


def reference_move(floor, boxes, player, action):
    dr, dc = STEP[action]
    one = (player[0] + dr, player[1] + dc)
    two = (player[0] + 2 * dr, player[1] + 2 * dc)
    if one not in floor:
        return player, set(boxes)
    if one not in boxes:
        return one, set(boxes)
    if two in floor and two not in boxes:
        return one, (set(boxes) - {one}) | {two}
    return player, set(boxes)


def test_agrees_with_the_rules_on_random_rooms():
    rng = random.Random(0)
    for _ in range(300):
        floor = {(r, c) for r in range(1, 6) for c in range(1, 6) if rng.random() < 0.75}
        if not floor:
            continue
        cells = sorted(floor)
        player = rng.choice(cells)
        boxes = {cell for cell in cells if cell != player and rng.random() < 0.3}
        action = rng.choice(sorted(STEP))
        assert move(floor, boxes, player, action) == reference_move(floor, boxes, player, action), \
            (sorted(floor), sorted(boxes), player, action)
