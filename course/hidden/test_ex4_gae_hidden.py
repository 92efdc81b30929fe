"""Exercise 4 (hidden tests): starpo.compute_gae with gamma/lam < 1, empty masks and other shapes."""
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

compute_gae = adapters.function("ex4-gae")


def test_hand_worked_example_with_gamma_and_lam_below_one():
    # Response tokens at t = 0, 2, 3 (t = 1 is an observation token, its value 50 skipped).
    r = torch.tensor([[0., 0., 0., 1.]])
    v = torch.tensor([[1., 50., 2., 4.]])
    mask = torch.tensor([[1., 0., 1., 1.]])
    adv, ret = compute_gae(r, v, mask, gamma=0.5, lam=0.5)
    # t=3: 1 - 4 = -3
    # t=2: (0 + .5*4 - 2) + .25*(-3) = -0.75
    # t=0: (0 + .5*2 - 1) + .25*(-0.75) = -0.1875
    assert torch.allclose(adv, torch.tensor([[-0.1875, 0., -0.75, -3.]]), atol=1e-6)
    assert torch.allclose(ret, torch.tensor([[0.8125, 0., 1.25, 1.]]), atol=1e-6)


def test_an_empty_row_is_all_zero_and_leaves_other_rows_alone():
    r = torch.tensor([[3., 1., 2.], [0., 0., 1.]])
    v = torch.tensor([[1., 1., 1.], [0.2, 0.1, 0.5]])
    mask = torch.tensor([[0., 0., 0.], [1., 1., 1.]])
    adv, ret = compute_gae(r, v, mask, 1.0, 1.0)
    assert adv[0].tolist() == [0., 0., 0.] and ret[0].tolist() == [0., 0., 0.]
    assert torch.allclose(adv[1], torch.tensor([0.8, 0.9, 0.5]), atol=1e-6)
    assert torch.allclose(ret[1], torch.ones(3), atol=1e-6)


def test_rewards_on_masked_tokens_are_ignored_and_lam_zero_is_one_step_td():
    mask = torch.tensor([[0., 1., 0., 1., 0.]])  # prompt, answer, observation, answer, padding
    v = torch.tensor([[9., 0.5, 9., 0.25, 9.]])
    r = torch.tensor([[100., 0., -100., 1., 100.]])
    adv, ret = compute_gae(r, v, mask, 1.0, 1.0)
    assert torch.allclose(adv, torch.tensor([[0., 0.5, 0., 0.75, 0.]]), atol=1e-6)
    assert torch.allclose(ret, torch.tensor([[0., 1., 0., 1., 0.]]), atol=1e-6)
    adv, _ = compute_gae(r, v, mask, 0.8, 0.0)  # A_t = r_t + gamma * V_next - V_t
    assert torch.allclose(adv, torch.tensor([[0., 0.8 * 0.25 - 0.5, 0., 0.75, 0.]]), atol=1e-6)


def test_agrees_with_loops_on_random_batches_float64():
    rng = random.Random(4242)
    for _ in range(12):
        B, T = rng.randint(1, 6), rng.randint(1, 25)
        gamma, lam = rng.choice([1.0, 0.97, 0.6]), rng.choice([1.0, 0.9, 0.0])
        r = [[rng.choice([0.0, rng.uniform(-3, 3)]) for _ in range(T)] for _ in range(B)]
        v = [[rng.gauss(0, 1) for _ in range(T)] for _ in range(B)]
        mask = [[float(rng.random() < 0.5) for _ in range(T)] for _ in range(B)]
        want_adv = [[0.0] * T for _ in range(B)]
        want_ret = [[0.0] * T for _ in range(B)]
        for b in range(B):
            steps = [t for t in range(T) if mask[b][t]]
            for i, t in enumerate(steps):  # the sum form of GAE over the response tokens only
                total = 0.0
                for k, s in enumerate(steps[i:]):
                    nxt = v[b][steps[i + k + 1]] if i + k + 1 < len(steps) else 0.0
                    total += (gamma * lam) ** k * (r[b][s] + gamma * nxt - v[b][s])
                want_adv[b][t], want_ret[b][t] = total, total + v[b][t]
        adv, ret = compute_gae(*(torch.tensor(x, dtype=torch.float64) for x in (r, v, mask)), gamma, lam)
        assert torch.allclose(adv.double(), torch.tensor(want_adv, dtype=torch.float64), atol=1e-9)
        assert torch.allclose(ret.double(), torch.tensor(want_ret, dtype=torch.float64), atol=1e-9)
