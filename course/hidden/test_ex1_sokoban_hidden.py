"""Exercise 1 (hidden tests): envs.sokoban_move on other rooms, seeds and edge cases."""
import os
import random
import sys

COURSE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [COURSE, os.path.join(COURSE, "tests")]
from test_ex1_sokoban import STEP, move, room  # noqa: E402  the visible tests' helpers


def test_two_boxes_in_a_row_cannot_be_pushed():
    floor = room(3, 8)  # row 1, columns 1..6
    boxes = {(1, 3), (1, 4)}
    assert move(floor, boxes, (1, 2), "Right") == ((1, 2), boxes)
    assert move(floor, boxes, (1, 5), "Left") == ((1, 5), boxes)
    floor = room(8, 3)  # column 1, rows 1..6
    boxes = {(2, 1), (3, 1)}
    assert move(floor, boxes, (4, 1), "Up") == ((4, 1), boxes)
    assert move(floor, boxes, (1, 1), "Down") == ((1, 1), boxes)


def test_box_against_a_wall_in_every_direction():
    # A plus-shaped room: centre (2, 2) and its four neighbours; each neighbour holds a box with wall behind.
    floor = {(2, 2), (1, 2), (3, 2), (2, 1), (2, 3)}
    boxes = {(1, 2), (3, 2), (2, 1), (2, 3)}
    for action in STEP:
        assert move(floor, boxes, (2, 2), action) == ((2, 2), boxes), action


def test_a_box_pushed_past_another_box_and_a_corner():
    floor = room(5, 5)  # cells 1..3 x 1..3
    # A box beside another box but not in the push line moves freely.
    assert move(floor, {(2, 2), (1, 3)}, (2, 1), "Right") == ((2, 2), {(2, 3), (1, 3)})
    # Into the corner, then no further.
    assert move(floor, {(2, 3)}, (3, 3), "Up") == ((2, 3), {(1, 3)})
    assert move(floor, {(1, 3)}, (2, 3), "Up") == ((2, 3), {(1, 3)})
    assert move(floor, {(1, 3)}, (1, 2), "Right") == ((1, 2), {(1, 3)})


def test_a_scripted_walk():
    # #######
    # #  .  #   row 1: columns 1..5 floor
    # # $#  #   row 2: (2, 3) is wall
    # #@    #   row 3
    # #######
    floor = room(5, 7) - {(2, 3)}
    player, boxes = (3, 1), {(2, 2)}
    script = [("Up", (2, 1), {(2, 2)}), ("Right", (2, 1), {(2, 2)}),  # box against the inner wall
              ("Down", (3, 1), {(2, 2)}), ("Right", (3, 2), {(2, 2)}),
              ("Up", (2, 2), {(1, 2)}), ("Up", (2, 2), {(1, 2)}),      # box against the outer wall
              ("Left", (2, 1), {(1, 2)}), ("Up", (1, 1), {(1, 2)}),
              ("Right", (1, 2), {(1, 3)}), ("Right", (1, 3), {(1, 4)}), ("Down", (1, 3), {(1, 4)})]
    for action, want_player, want_boxes in script:
        player, boxes = move(floor, boxes, player, action)
        assert (player, boxes) == (want_player, want_boxes), action


def test_agrees_with_the_rules_on_random_rooms_with_many_boxes():
    rng = random.Random(2024)
    pushes = 0
    for _ in range(500):
        rows, cols = rng.randint(3, 9), rng.randint(3, 9)
        floor = {(r, c) for r in range(rows) for c in range(cols) if rng.random() < 0.8}
        if not floor:
            continue
        cells = sorted(floor)
        player = rng.choice(cells)
        boxes = {cell for cell in cells if cell != player and rng.random() < 0.5}
        action = rng.choice(sorted(STEP))
        dr, dc = STEP[action]
        one, two = (player[0] + dr, player[1] + dc), (player[0] + 2 * dr, player[1] + 2 * dc)
        if one not in floor:
            want = (player, boxes)
        elif one not in boxes:
            want = (one, boxes)
        elif two in floor and two not in boxes:
            want, pushes = (one, (boxes - {one}) | {two}), pushes + 1
        else:
            want = (player, boxes)
        before = set(boxes)
        assert move(floor, boxes, player, action) == want, (sorted(floor), sorted(boxes), player, action)
        assert boxes == before
    assert pushes > 20
