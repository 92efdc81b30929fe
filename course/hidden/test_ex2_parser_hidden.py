"""Exercise 2 (hidden tests): envs.parse_answer on other vocabularies, modes and random texts."""
import os
import random
import re
import sys

COURSE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [COURSE, os.path.join(COURSE, "tests")]
from test_ex2_parser import MOVES, parse  # noqa: E402  the visible tests' helpers


def test_without_think():
    assert parse("<answer> up || LEFT </answer>", require_think=False) == ("", ["Up", "Left"], True)
    assert parse("<think>ignored</think><answer>Down</answer>", require_think=False) == ("", ["Down"], True)
    assert parse("before <answer>Right</answer> after <answer>Up</answer>", require_think=False) == \
        ("", ["Right"], True)
    assert parse("<answer>Right", require_think=False) == ("", [], False)
    # With require_think (the default) a lone answer is no pair.
    assert parse("<answer>Right</answer>") == ("", [], False)


def test_other_vocabularies_and_max_actions_one():
    arms = ["Phoenix", "Dragon"]
    assert parse("<think>safe</think><answer>PHOENIX</answer>", 1, valid=arms) == ("safe", ["Phoenix"], True)
    assert parse("<think>a</think><answer>dragon || bogus</answer>", 1, valid=arms) == ("a", ["Dragon"], True)
    assert parse("<think>a</think><answer>bogus || dragon</answer>", 1, valid=arms) == ("a", [], False)
    assert parse("<think>a</think><answer>Up</answer>", 1, valid=arms) == ("a", [], False)


def test_tags_are_case_sensitive_and_the_first_pair_counts():
    assert parse("<THINK>a</THINK><ANSWER>Up</ANSWER>") == ("", [], False)
    assert parse("<Think>a</Think><answer>Up</answer>") == ("", [], False)
    assert parse("<think>a</think>\n\n <answer>Up</answer><think>b</think><answer>Down</answer>") == \
        ("a", ["Up"], True)
    assert parse("<think>  multi\nline  </think>\t<answer>\nleft\n</answer>") == ("multi\nline", ["Left"], True)


def test_empty_and_blank_answers():
    assert parse("<think>z</think><answer> || || </answer>") == ("z", [], False)
    assert parse("<think>z</think><answer>\n\t</answer>") == ("z", [], False)
    assert parse("<think>z</think><answer>Up | Down</answer>") == ("z", [], False)


def reference(text, valid, max_actions, require_think):
    pattern = r"<think>(.*?)</think>\s*<answer>(.*?)</answer>" if require_think else r"<answer>(.*?)</answer>"
    found = re.search(pattern, text, re.DOTALL)
    if not found:
        return "", [], False
    think = found.group(1).strip() if require_think else ""
    pieces = []
    for piece in found.groups()[-1].split("||"):
        if piece.strip():
            pieces.append(piece.strip())
    pieces = pieces[:max_actions]
    actions = []
    for piece in pieces:
        for name in valid:
            if piece.lower() == name.lower():
                actions.append(name)
    return think, actions, len(actions) > 0 and len(actions) == len(pieces)


def test_agrees_with_a_regular_expression_on_random_texts():
    rng = random.Random(77)
    atoms = ["<think>", "</think>", "<answer>", "</answer>", "||", "|", "uP", "Down", "left", "RIGHT", "Fly",
             " ", "\n", "x", "<", ">"]
    good = 0
    for i in range(3000):
        middle = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 6)))
        if i % 2:
            text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 20)))
        else:
            text = f"<think>{rng.choice(['', 'a', ' b '])}</think>{rng.choice(['', ' ', chr(10)])}<answer>{middle}</answer>"
        max_actions, require_think = rng.randint(1, 4), i % 5 != 0
        want = reference(text, MOVES, max_actions, require_think)
        assert parse(text, max_actions, require_think) == want, repr(text)
        good += want[2]
    assert good > 100
