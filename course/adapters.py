"""The one place where the graded tests reach the functions a student implements. An assignment that
renames or moves a function changes the line here, and every test follows.

Each exercise's module is imported only when its tests ask for it, so a syntax error in starpo.py costs
the exercises whose modules import it (starpo's, and ragen_mini's, which imports starpo.py, rollout.py and
envs.py) and leaves envs.py's and rollout.py's exercises gradable (course/grade.py runs each exercise apart)."""
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root

EXERCISES = {  # exercise id -> (module, function, points)
    "ex1-sokoban": ("envs", "sokoban_move", 10),
    "ex2-parser": ("envs", "parse_answer", 10),
    "ex3-token-rewards": ("starpo", "token_level_rewards", 10),
    "ex4-gae": ("starpo", "compute_gae", 15),
    "ex5-grpo": ("starpo", "compute_grpo_advantages", 10),
    "ex6-policy-loss": ("starpo", "policy_loss", 15),
    "ex7-value-loss": ("starpo", "value_loss", 10),
    "ex8-filter": ("starpo", "select_groups_by_reward_std", 10),
    "ex9-response-mask": ("rollout", "append_reply", 10),
    "ex10-logprobs": ("ragen_mini", "token_logprobs", 10),
    "ex11-loss-normalizer": ("ragen_mini", "loss_normalizer", 5),
    "ex12-update": ("ragen_mini", "update", 15),
}


def function(exercise):
    module, name, _ = EXERCISES[exercise]
    return getattr(importlib.import_module(module), name)


def points(exercise):
    return EXERCISES[exercise][2]


def fixture(exercise):
    """The stored expected numbers of an exercise's visible tests, course/tests/fixtures/<exercise>.json: made once
    from an independent reference and checked in, so the tests hold no implementation of what they grade."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "fixtures", f"{exercise}.json")
    with open(path) as f:
        return json.load(f)
