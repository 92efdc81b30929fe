"""The one place where the graded tests reach the functions a student implements. An assignment that
renames or moves a function changes the line here, and every test follows."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import envs  # noqa: E402
import starpo  # noqa: E402

EXERCISES = {  # exercise id -> (function, points)
    "ex1-sokoban": (envs.sokoban_move, 10),
    "ex2-parser": (envs.parse_answer, 10),
    "ex3-token-rewards": (starpo.token_level_rewards, 10),
    "ex4-gae": (starpo.compute_gae, 15),
    "ex5-grpo": (starpo.compute_grpo_advantages, 10),
    "ex6-policy-loss": (starpo.policy_loss, 15),
    "ex7-value-loss": (starpo.value_loss, 10),
    "ex8-filter": (starpo.select_groups_by_reward_std, 10),
}


def function(exercise):
    return EXERCISES[exercise][0]
