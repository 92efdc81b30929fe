"""Exercise 2 (visible tests): envs.parse_answer, the answer parser and the format penalty.

parse_answer(text, valid_actions, max_actions, require_think=True) -> (think, actions, format_ok)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

parse_answer = adapters.function("ex2-parser")

MOVES = ["Up", "Down", "Left", "Right"]


def parse(text, max_actions=5, require_think=True, valid=MOVES):
    think, actions, format_ok = parse_answer(text, valid, max_actions, require_think)
    return think, list(actions), format_ok


def test_a_well_formed_answer():
    assert parse("<think>the box is left</think><answer>Left</answer>") == ("the box is left", ["Left"], True)
    assert parse("<think> plan </think>\n<answer>Down || Right || Up</answer>") == \
        ("plan", ["Down", "Right", "Up"], True)


def test_actions_match_case_insensitively_and_come_back_canonical():
    assert parse("<think>t</think><answer>dOWN || right||UP</answer>") == ("t", ["Down", "Right", "Up"], True)


def test_no_pair_means_nothing_and_a_format_penalty():
    for text in ["Left", "<think>hm</think>", "<think>hm</think><answer>Left",
                 "<answer>Left</answer><think>hm</think>", "", "<think>a</think> then <answer>Up</answer>"]:
        assert parse(text) == ("", [], False), repr(text)


def test_invalid_pieces_are_dropped_and_break_the_format():
    assert parse("<think>x</think><answer>Left || Jump || Up</answer>") == ("x", ["Left", "Up"], False)
    assert parse("<think>x</think><answer>Left, Up</answer>") == ("x", [], False)
    assert parse("<think>x</think><answer></answer>") == ("x", [], False)


def test_only_the_first_max_actions_pieces_are_kept_before_checking():
    text = "<think></think><answer>Up || Left || Down || Fly</answer>"
    assert parse(text, max_actions=3) == ("", ["Up", "Left", "Down"], True)  # "Fly" dropped unread
    assert parse(text, max_actions=4) == ("", ["Up", "Left", "Down"], False)
    # Empty pieces (a trailing or doubled "||") do not count, and text around the pair is ignored.
    assert parse("Sure. <think>ok</think><answer>Right |||| Up ||</answer> bye", max_actions=2) == \
        ("ok", ["Right", "Up"], True)
