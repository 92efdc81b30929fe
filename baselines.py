"""Baselines on the evaluation seeds: what a uniform random policy, the optimal policy and (FrozenLake) a
slip-ignoring shortest-path walker achieve with the agent's budgets. They put the RL numbers in context:
the share of the gap closed is (success after RL - random) / (optimal - random).

    python baselines.py --env frozenlake --policy random      # or --policy optimal; bandit / sokoban
    python baselines.py --env frozenlake --policy shortest    # FrozenLake only

Defaults match the trainer's evaluation: seeds 1000000 + i for i < 256, 5 turns x 5 actions per turn,
10 actions per trajectory (Bandit: 1 / 1 / 1 whatever is passed). Prints one JSON line.

- random: each turn draws a uniform number of actions in 1..max_actions_per_turn, each uniform over the
  valid actions; actions past the trajectory budget are dropped and an episode that ends mid-turn
  skips the rest. Averaged over --episodes-per-seed rollouts per seed for a low-noise estimate.
- optimal: Bandit always pulls the risky arm. Sokoban plays a breadth-first-search shortest solution
  (success if it fits the budget). FrozenLake: value iteration over (cell, actions left) gives the
  exact probability of reaching the goal when the agent sees the state after every action; the agent
  commits to up to 5 actions per turn, so this is an upper bound on what it can reach.
- shortest (FrozenLake): a player who ignores the slip and always steps along a shortest hole-free path
  to the goal (ties between equally short moves: the first of Left, Down, Right, Up), seeing the state
  after every action; its exact success probability, by the same value iteration with its action in
  place of the best one. Exact for one action per turn (10 x 1); a 5-action turn commits to its moves,
  so there it is an upper bound, like the optimum. It tells "navigates" apart from "plans for slips".
"""
import argparse
import copy
import json
import math
import random
from collections import deque

from envs import make_env, random_turn_actions, solve_sokoban


def play_random(env, seed, rng, max_turns, max_actions_per_turn):
    """One random episode; returns (success, return). The env's own max_actions ends the episode
    (truncated) when the trajectory budget is spent, which drops the rest of the turn."""
    _, info = env.reset(seed)
    total = 0.0
    for _ in range(max_turns):
        for action in random_turn_actions(rng, env.actions, max_actions_per_turn):
            _, reward, terminated, truncated, info = env.step(action)
            total += reward
            if terminated or truncated:
                return info["success"], total
    return info["success"], total


def frozenlake_values(env, budget, policy=None):
    """Value iteration on the current map: values[k][cell] = the highest probability of reaching the
    goal from `cell` with k actions left, choosing each action after seeing where the last one led.
    The goal is worth 1 and holes 0 whatever is left; with 0 actions left only the goal counts.
    With `policy` (cell -> action) the same recursion evaluates that fixed policy instead.

    Example, the map "P_\nOG" (P at (0, 0), the hole below it): values[3][(0, 0)] is 7/27 for the
    optimum (first Up, where it cannot fall in) and 5/27 with shortest_path_policy (Right, then Down)."""
    cells = [(r, c) for r in range(env.rows) for c in range(env.cols)]
    values = [{cell: float(cell == env.goal) for cell in cells}]
    for _ in range(budget):
        last = values[-1]

        def backup(cell):
            if cell == env.goal or cell in env.holes:  # the episode is over: its value stays
                return last[cell]
            if policy is not None:
                return expected(env, last, cell, policy(cell))
            return max(expected(env, last, cell, action) for action in env.actions)

        values.append({cell: backup(cell) for cell in cells})
    return values


def expected(env, values, cell, action):
    outcomes = env.outcomes(cell, action)  # equally likely
    return sum(values[nxt] for nxt in outcomes) / len(outcomes)


def shortest_path_policy(env):
    """cell -> the action whose intended cell is fewest steps from the goal (breadth-first search over
    the cells that are not holes; ties go to the first action in env.actions). It ignores the slip."""
    still = copy.copy(env)
    still.is_slippery = False  # its outcomes() is just the intended cell

    def intended(cell, action):
        return still.outcomes(cell, action)[0]

    distance, frontier = {env.goal: 0}, deque([env.goal])
    while frontier:  # moves are reversible, so searching from the goal gives every cell's distance to it
        cell = frontier.popleft()
        for action in env.actions:
            nxt = intended(cell, action)
            if nxt not in distance and nxt not in env.holes:
                distance[nxt] = distance[cell] + 1
                frontier.append(nxt)
    return lambda cell: min(env.actions, key=lambda action: distance.get(intended(cell, action), math.inf))


def play_optimal(env_name, env, seed, budget):
    """Returns (success, return) of the optimal policy: expected values for FrozenLake."""
    _, info = env.reset(seed)
    if env_name == "frozenlake":  # the exact expectation, no sampling (reward 1 only at the goal)
        p = frozenlake_values(env, budget)[budget][env.player]
        return p, p
    if env_name == "bandit":  # the risky arm is the better bet: 0.25 > 0.1 on average
        plan = [env.high_name]
    else:  # Sokoban: the shortest solution, cut at the budget if it is longer
        plan = (solve_sokoban(env.floor, env.targets, env.boxes, env.player, 100) or [])[:budget]
    total = 0.0
    for action in plan:
        _, reward, terminated, truncated, info = env.step(action)
        total += reward
    return info["success"], total


def evaluate(env_name, policy, seeds, max_turns=5, max_actions_per_turn=5, max_actions=10,
             episodes_per_seed=20, env_kwargs=None, rng_seed=0):
    if policy not in ("random", "optimal", "shortest"):
        raise ValueError(f"unknown policy {policy!r}: random, optimal or shortest")
    if policy == "shortest" and env_name != "frozenlake":
        raise ValueError("policy 'shortest' is for frozenlake only")
    if env_name == "bandit":  # one turn, one action: the budgets do not apply
        max_turns, max_actions_per_turn, max_actions = 1, 1, 1
        env = make_env(env_name, **(env_kwargs or {}))
    else:
        env = make_env(env_name, max_actions=max_actions, **(env_kwargs or {}))
    rng = random.Random(rng_seed)
    budget = min(max_actions, max_turns * max_actions_per_turn)
    results = []
    for seed in seeds:
        if policy == "random":
            results += [play_random(env, seed, rng, max_turns, max_actions_per_turn)
                        for _ in range(episodes_per_seed)]
        elif policy == "optimal":
            results.append(play_optimal(env_name, env, seed, budget))
        else:  # shortest (FrozenLake): the exact success probability of the slip-ignoring walker
            env.reset(seed)
            success = frozenlake_values(env, budget, shortest_path_policy(env))[budget][env.player]
            results.append((success, success))
    return {"env": env_name, "policy": policy,
            "success_rate": round(sum(s for s, _ in results) / len(results), 4),
            "mean_return": round(sum(r for _, r in results) / len(results), 4),
            "num_seeds": len(seeds)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", required=True, choices=["bandit", "sokoban", "frozenlake"])
    parser.add_argument("--policy", required=True, choices=["random", "optimal", "shortest"])
    parser.add_argument("--num-seeds", type=int, default=256)
    parser.add_argument("--seed-offset", type=int, default=1_000_000)
    parser.add_argument("--max-turns", type=int, default=5)
    parser.add_argument("--max-actions-per-turn", type=int, default=5)
    parser.add_argument("--max-actions", type=int, default=10)
    parser.add_argument("--episodes-per-seed", type=int, default=20, help="random policy only")
    parser.add_argument("--env-kwargs", type=json.loads, default={},
                        help='extra make_env keywords as JSON, e.g. \'{"is_slippery": false}\'')
    args = parser.parse_args()
    counts = ("num_seeds", "max_turns", "max_actions_per_turn", "max_actions", "episodes_per_seed")
    for name in counts:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.policy == "shortest" and args.env != "frozenlake":
        parser.error("--policy shortest is for --env frozenlake only")
    try:
        make_env(args.env, **args.env_kwargs)  # a wrong keyword or value is a usage error, not a traceback
    except (ValueError, TypeError) as error:
        parser.error(f"--env-kwargs: {error}")
    seeds = [args.seed_offset + i for i in range(args.num_seeds)]
    result = evaluate(args.env, args.policy, seeds, args.max_turns, args.max_actions_per_turn,
                      args.max_actions, args.episodes_per_seed, args.env_kwargs)
    if args.policy == "random":
        result["episodes_per_seed"] = args.episodes_per_seed
    print(json.dumps(result))


if __name__ == "__main__":
    main()
