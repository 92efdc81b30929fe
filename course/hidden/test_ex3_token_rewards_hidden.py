"""Exercise 3 (hidden tests): starpo.token_level_rewards on other shapes, seeds and edge cases."""
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

token_level_rewards = adapters.function("ex3-token-rewards")


def test_last_column_and_a_single_token():
    out = token_level_rewards(torch.tensor([7.0]), torch.tensor([[1.0]]))
    assert out.tolist() == [[7.0]]
    mask = torch.tensor([[0., 0., 0., 1.], [1., 0., 0., 0.], [1., 1., 1., 1.]])
    out = token_level_rewards(torch.tensor([1.0, 2.0, 3.0]), mask)
    assert out.tolist() == [[0., 0., 0., 1.], [2., 0., 0., 0.], [0., 0., 0., 3.]]


def test_a_zero_reward_leaves_everything_zero():
    mask = torch.tensor([[1., 1., 0., 1., 1., 0., 0.]])
    assert token_level_rewards(torch.zeros(1), mask).tolist() == [[0.] * 7]


def test_kl_skips_observation_and_padding_tokens():
    mask = torch.tensor([[1., 1., 0., 0., 1., 0., 0.]])
    kl = torch.tensor([[1., 2., 100., 100., 3., 100., 100.]])
    out = token_level_rewards(torch.tensor([1.0]), mask, kl=kl, kl_coef=0.5)
    assert torch.allclose(out, torch.tensor([[-0.5, -1.0, 0., 0., 1.0 - 1.5, 0., 0.]]))
    # kl_coef = 0: no KL term at all.
    out = token_level_rewards(torch.tensor([1.0]), mask, kl=kl, kl_coef=0.0)
    assert out.tolist() == [[0., 0., 0., 0., 1., 0., 0.]]


def test_agrees_with_a_loop_on_random_batches():
    rng = random.Random(31337)
    for _ in range(25):
        B, T = rng.randint(1, 8), rng.randint(1, 30)
        mask, rewards, kl = [], [], []
        for _ in range(B):
            start = rng.randint(0, T - 1)
            end = rng.randint(start + 1, T)
            row = [0.0] * T
            for t in range(start, end):
                row[t] = float(rng.random() < 0.7)
            row[start] = 1.0
            mask.append(row)
            rewards.append(rng.choice([0.0, 1.0, -0.1, rng.uniform(-5, 5)]))
            kl.append([rng.uniform(0, 2) for _ in range(T)])
        coef = rng.choice([0.0, 0.01, 0.3])
        want = []
        for b in range(B):
            last = [t for t in range(T) if mask[b][t]][-1]
            want.append([(rewards[b] if t == last else 0.0) - coef * kl[b][t] * mask[b][t] for t in range(T)])
        out = token_level_rewards(torch.tensor(rewards, dtype=torch.float64), torch.tensor(mask, dtype=torch.float64),
                                  kl=torch.tensor(kl, dtype=torch.float64), kl_coef=coef)
        assert out.shape == (B, T)
        assert torch.allclose(out.double(), torch.tensor(want, dtype=torch.float64), atol=1e-9)
