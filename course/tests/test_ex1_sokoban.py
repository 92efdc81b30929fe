"""Exercise 1 (visible tests): envs.sokoban_move, Sokoban's push rules.

A state is (player, boxes): player is a (row, col) cell, boxes a set of cells. `floor` is the set of
walkable cells; every other cell is a wall. Actions are "Up", "Down", "Left", "Right".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

sokoban_move = adapters.function("ex1-sokoban")

STEP = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}
WEIGHTS = {"test_pushes_a_box_onto_free_floor": 2, "test_a_box_cannot_be_pushed_into_a_wall": 2,
           "test_agrees_with_stored_moves_on_random_rooms": 3}


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


def parse_room(text):
    """'#_X/#P_' (rows joined by '/': # wall, _ floor, X box, P player) -> (floor, boxes, player)."""
    cells = {(r, c): ch for r, row in enumerate(text.split("/")) for c, ch in enumerate(row)}
    return ({cell for cell, ch in cells.items() if ch != "#"}, {cell for cell, ch in cells.items() if ch == "X"},
            next(cell for cell, ch in cells.items() if ch == "P"))


def test_agrees_with_stored_moves_on_random_rooms():
    """200 random rooms; each expected room was made once from an independent implementation of the rules
    (course/hidden/make_fixtures.py) and stored in fixtures/ex1-sokoban.json."""
    cases = adapters.fixture("ex1-sokoban")["random_rooms"]
    for case in cases:
        floor, boxes, player = parse_room(case["before"])
        _, want_boxes, want_player = parse_room(case["after"])
        assert move(floor, boxes, player, case["action"]) == (want_player, want_boxes), \
            f"{case['before']} {case['action']}: expected {case['after']}"
