"""Exercise 4 (visible tests): starpo.compute_gae, GAE that skips observation tokens.

compute_gae(token_rewards (B, T), values (B, T), response_mask (B, T), gamma, lam) -> (advantages, returns)
"""
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

compute_gae = adapters.function("ex4-gae")


def reference_gae(r, v, mask, gamma, lam):
    """Plain loops: walk back over the response tokens only."""
    adv = [[0.0] * len(row) for row in r]
    ret = [[0.0] * len(row) for row in r]
    for b in range(len(r)):
        next_v = next_a = 0.0
        for t in reversed(range(len(r[b]))):
            if not mask[b][t]:
                continue
            a = r[b][t] + gamma * next_v - v[b][t] + gamma * lam * next_a
            adv[b][t], ret[b][t] = a, a + v[b][t]
            next_v, next_a = v[b][t], a
    return adv, ret


def test_the_worked_example():
    adv, ret = compute_gae(torch.tensor([[0., 0., 0., 1.]]), torch.tensor([[.5, .6, 9., .8]]),
                           torch.tensor([[1., 1., 0., 1.]]), gamma=1.0, lam=1.0)
    assert torch.allclose(adv, torch.tensor([[0.5, 0.4, 0.0, 0.2]]), atol=1e-6)
    assert torch.allclose(ret, torch.tensor([[1., 1., 0., 1.]]), atol=1e-6)


def test_gamma_lam_one_gives_reward_to_go_minus_value():
    r = torch.tensor([[0., 1., 0., 2., 0.]])
    v = torch.tensor([[0.3, -0.2, 0.1, 0.4, 0.0]])
    adv, ret = compute_gae(r, v, torch.ones(1, 5), 1.0, 1.0)
    to_go = torch.tensor([[3., 3., 2., 2., 0.]])
    assert torch.allclose(ret, to_go, atol=1e-6)
    assert torch.allclose(adv, to_go - v, atol=1e-6)


def test_masked_positions_get_zero():
    r = torch.tensor([[0., 5., 0., 1., 7.]])
    v = torch.tensor([[1., 2., 3., 4., 5.]])
    mask = torch.tensor([[1., 0., 1., 1., 0.]])
    adv, ret = compute_gae(r, v, mask, 1.0, 1.0)
    assert adv[0, 1].item() == 0 and adv[0, 4].item() == 0
    assert ret[0, 1].item() == 0 and ret[0, 4].item() == 0
    # t=3: 1 - 4 = -3;  t=2: (0 + 4 - 3) - 3 = -2;  t=0: (0 + 3 - 1) - 2 = 0
    assert torch.allclose(adv, torch.tensor([[0., 0., -2., -3., 0.]]), atol=1e-6)


def test_agrees_with_loops_on_random_multi_turn_batches():
    rng = random.Random(0)
    for gamma, lam in [(1.0, 1.0), (0.99, 0.95), (0.9, 0.5)]:
        B, T = 4, 10
        r = [[rng.uniform(-1, 1) for _ in range(T)] for _ in range(B)]
        v = [[rng.uniform(-1, 1) for _ in range(T)] for _ in range(B)]
        mask = [[float(rng.random() < 0.6) for _ in range(T)] for _ in range(B)]
        adv, ret = compute_gae(torch.tensor(r), torch.tensor(v), torch.tensor(mask), gamma, lam)
        want_adv, want_ret = reference_gae(r, v, mask, gamma, lam)
        assert torch.allclose(adv, torch.tensor(want_adv), atol=1e-5), (gamma, lam)
        assert torch.allclose(ret, torch.tensor(want_ret), atol=1e-5), (gamma, lam)
