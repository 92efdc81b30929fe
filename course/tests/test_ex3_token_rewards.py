"""Exercise 3 (visible tests): starpo.token_level_rewards, where the trajectory's reward sits.

token_level_rewards(rewards (B,), response_mask (B, T), kl=None, kl_coef=0.0) -> (B, T)
"""
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

token_level_rewards = adapters.function("ex3-token-rewards")


def reference(rewards, mask, kl=None, kl_coef=0.0):
    out = []
    for b, row in enumerate(mask):
        last = max(t for t, m in enumerate(row) if m)
        line = [0.0] * len(row)
        line[last] = rewards[b]
        if kl is not None:
            line = [x - kl_coef * kl[b][t] * row[t] for t, x in enumerate(line)]
        out.append(line)
    return torch.tensor(out)


def test_the_reward_sits_on_the_last_sampled_token():
    mask = torch.tensor([[0., 1., 1., 0., 1., 0.], [1., 1., 0., 0., 0., 0.]])
    out = token_level_rewards(torch.tensor([2., -1.]), mask)
    assert torch.equal(out, torch.tensor([[0., 0., 0., 0., 2., 0.], [0., -1., 0., 0., 0., 0.]]))


def test_kl_is_charged_on_every_sampled_token():
    mask = torch.tensor([[0., 1., 1., 0., 1., 0.], [1., 1., 0., 0., 0., 0.]])
    out = token_level_rewards(torch.tensor([2., -1.]), mask, kl=torch.full((2, 6), 0.5), kl_coef=0.1)
    want = torch.tensor([[0., -.05, -.05, 0., 1.95, 0.], [-.05, -1.05, 0., 0., 0., 0.]])
    assert torch.allclose(out, want, atol=1e-6)


def test_shape_and_one_reward_per_row():
    mask = torch.tensor([[1., 1., 1.], [0., 0., 1.], [0., 1., 0.]])
    out = token_level_rewards(torch.tensor([0.5, 3.0, -2.0]), mask)
    assert out.shape == (3, 3)
    assert torch.allclose(out.sum(-1), torch.tensor([0.5, 3.0, -2.0]))
    assert (out != 0).sum().item() == 3
    assert out[0, 2].item() == 0.5 and out[1, 2].item() == 3.0 and out[2, 1].item() == -2.0


def test_agrees_with_a_loop_on_random_multi_turn_masks():
    rng = random.Random(0)
    for _ in range(20):
        B, T = rng.randint(1, 5), rng.randint(2, 12)
        mask = [[float(rng.random() < 0.5) for _ in range(T)] for _ in range(B)]
        for row in mask:
            row[rng.randrange(T)] = 1.0  # at least one sampled token per row
        rewards = [rng.uniform(-2, 2) for _ in range(B)]
        kl = [[rng.uniform(-1, 1) for _ in range(T)] for _ in range(B)]
        out = token_level_rewards(torch.tensor(rewards), torch.tensor(mask))
        assert torch.allclose(out, reference(rewards, mask), atol=1e-6)
        out = token_level_rewards(torch.tensor(rewards), torch.tensor(mask), kl=torch.tensor(kl), kl_coef=0.2)
        assert torch.allclose(out, reference(rewards, mask, kl, 0.2), atol=1e-6)
