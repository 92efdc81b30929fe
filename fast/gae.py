"""GAE without a loop over the tokens: optional, part of the fast engine (fast/__init__.py). It computes what
starpo.compute_gae computes on the readable path (the course's function), faster on a GPU: compute_gae's loop
over the tokens is some ten small operations per token, on a GPU each a kernel launch. Here each row's time
steps are packed together, and the backward recursion A_t = delta_t + gamma lam A_next becomes what it sums
to, A_t = sum over k >= t of (gamma lam)^(k - t) delta_k: a product with a triangular matrix of powers, a
block of BLOCK steps at a time, carried from block to block, on the tensors' own device.

Proved by tests/test_fast.py: the same advantages and returns as starpo.compute_gae, on random masks (rows
of several blocks among them) and on compute_gae's worked example.
"""
import torch
import torch.nn.functional as F

BLOCK = 256  # time steps per matrix product: a (BLOCK, BLOCK) matrix of powers, one product per block


def compute_gae(token_rewards, values, response_mask, gamma, lam):
    """starpo.compute_gae's arguments and numbers, with each row's time steps moved to the left first:
    removing the positions between steps changes nothing (compute_gae passes over them), and a trajectory of
    many turns samples a small share of its tokens. (B, T) each -> advantages, returns (B, T), float64 inside.

        mask  [[1, 0, 0, 1, 1]] -> step positions [[0, 3, 4]]: GAE on the (B, 3) gathered rewards and
        values, and the results are written back to columns 0, 3 and 4 (0 elsewhere).
    >>> rewards, values = torch.tensor([[0., 0., 0., 1.]]), torch.tensor([[.5, .6, 9., .8]])
    >>> compute_gae(rewards, values, torch.tensor([[1., 1., 0., 1.]]), gamma=1.0, lam=1.0)[0]
    tensor([[0.5000, 0.4000, 0.0000, 0.2000]])
    """
    is_step = response_mask.bool()  # (B, T)
    most = int(is_step.sum(1).max()) if is_step.numel() else 0  # S
    # a stable sort of "is not a step" puts each row's step positions first, in their order
    where = torch.argsort((~is_step).to(torch.uint8), dim=1, stable=True)[:, :most]  # (B, S)
    step = is_step.gather(1, where).double()                                          # (B, S) 1 = a step
    rewards, step_values = (x.gather(1, where).double() * step for x in (token_rewards, values))  # (B, S)
    next_values = F.pad(step_values[:, 1:], (0, 1))  # V of the next step, 0 past the last one
    deltas = (rewards + gamma * next_values - step_values) * step
    advantages = discounted_sums(deltas, gamma * lam) * step
    returns = (advantages + step_values) * step
    # every row's positions are distinct, so each column is written once
    return tuple(torch.zeros_like(token_rewards).scatter(1, where, x.to(token_rewards.dtype))
                 for x in (advantages, returns))


def discounted_sums(x, c):
    """(B, S) -> (B, S): entry t is sum over k >= t of c^(k - t) x_k, from the last block of BLOCK columns to
    the first: within a block a product with the matrix of c^(k - t) (k >= t), then the next block's first
    sum, carried back by c^(distance).

    >>> discounted_sums(torch.tensor([[1.0, 2.0, 4.0]], dtype=torch.float64), 0.5)  # 1 + 1 + 1, 2 + 2, 4
    tensor([[3., 4., 4.]], dtype=torch.float64)
    """
    out, carry = torch.empty_like(x), x.new_zeros(x.shape[0])  # carry: the sum at the next block's start
    for start in reversed(range(0, x.shape[1], BLOCK)):
        block = x[:, start:start + BLOCK]  # (B, n)
        n = block.shape[1]
        k = torch.arange(n, device=x.device, dtype=x.dtype)
        gap = k[:, None] - k[None, :]  # (n, n): row k, column t -> k - t
        powers = torch.where(gap >= 0, c ** gap.clamp(min=0), 0.0)  # 0^0 = 1: lam = 0 keeps delta_t
        out[:, start:start + n] = block @ powers + carry[:, None] * c ** (n - k)
        carry = out[:, start]
    return out
