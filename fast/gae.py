"""GAE on the CPU over the time steps alone: optional, part of the fast engine (fast/__init__.py). It computes
what starpo.compute_gae computes on the readable path (the course's function, which it calls), faster on a
GPU: compute_gae's loop over the tokens is some ten small operations per token, on a GPU each a kernel
launch, so it runs here on CPU copies, and over each row's time steps packed together instead of over every
token.

Proved by tests/test_fast.py: the same advantages and returns as starpo.compute_gae, on random time steps
and on compute_gae's worked example.
"""
import torch

import starpo


def compute_gae(token_rewards, values, steps, gamma, lam):
    """starpo.compute_gae's arguments and numbers, computed on the CPU by compute_gae_packed and brought back
    to the tensors' device. (B, T) each -> advantages, returns (B, T)"""
    device = token_rewards.device
    on_cpu = (x.cpu() for x in (token_rewards, values, steps))
    return tuple(x.to(device) for x in compute_gae_packed(*on_cpu, gamma, lam))


def compute_gae_packed(token_rewards, values, steps, gamma, lam):
    """starpo.compute_gae with each row's time steps moved to the left first: the same numbers, but its loop
    runs over the most steps a row has instead of over all T tokens. compute_gae passes over the positions
    between steps, so removing them changes nothing; a trajectory of many turns samples a small share of
    its tokens, so the loop gets far shorter.

        steps [[1, 0, 0, 1, 1]] -> step positions [[0, 3, 4]]: compute_gae on the (B, 3) gathered
        rewards and values, and the results are written back to columns 0, 3 and 4 (0 elsewhere).
    >>> rewards, values = torch.tensor([[0., 0., 0., 1.]]), torch.tensor([[.5, .6, 9., .8]])
    >>> compute_gae_packed(rewards, values, torch.tensor([[1., 1., 0., 1.]]), gamma=1.0, lam=1.0)[0]
    tensor([[0.5000, 0.4000, 0.0000, 0.2000]])
    """
    is_step = steps.bool()  # (B, T)
    most = int(is_step.sum(1).max()) if is_step.numel() else 0  # S
    # a stable sort of "is not a step" puts each row's step positions first, in their order
    where = torch.argsort((~is_step).to(torch.uint8), dim=1, stable=True)[:, :most]  # (B, S)
    advantages, returns = starpo.compute_gae(token_rewards.gather(1, where), values.gather(1, where),
                                             is_step.gather(1, where), gamma, lam)  # (B, S), 0 past the steps
    # every row's positions are distinct, so each column is written once
    return (torch.zeros_like(token_rewards).scatter(1, where, advantages),
            torch.zeros_like(token_rewards).scatter(1, where, returns))
