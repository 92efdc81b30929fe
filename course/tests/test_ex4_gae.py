"""Exercise 4 (visible tests): starpo.compute_gae, GAE that skips observation tokens.

compute_gae(token_rewards (B, T), values (B, T), steps (B, T), gamma, lam) -> (advantages, returns)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

compute_gae = adapters.function("ex4-gae")


WEIGHTS = {"test_the_worked_example": 2, "test_the_worked_example_with_a_discount": 6,
           "test_gamma_lam_one_gives_reward_to_go_minus_value": 1, "test_masked_positions_get_zero": 1,
           "test_agrees_with_stored_numbers_on_random_multi_turn_batches": 4}


def test_the_worked_example():
    adv, ret = compute_gae(torch.tensor([[0., 0., 0., 1.]]), torch.tensor([[.5, .6, 9., .8]]),
                           torch.tensor([[1., 1., 0., 1.]]), gamma=1.0, lam=1.0)
    assert torch.allclose(adv, torch.tensor([[0.5, 0.4, 0.0, 0.2]]), atol=1e-6)
    assert torch.allclose(ret, torch.tensor([[1., 1., 0., 1.]]), atol=1e-6)


def test_the_worked_example_with_a_discount():
    """The same turn with gamma = 0.9, lam = 0.8: now the observation token (t = 2, value 9) must be jumped
    over, not stepped through. Worked by hand; the steps are t = 0, 1, 3:
        t=3: delta = 1 - 0.8 = 0.2;                      A = 0.2
        t=1: delta = 0 + 0.9 * 0.8 - 0.6 = 0.12;         A = 0.12 + 0.72 * 0.2 = 0.264
        t=0: delta = 0 + 0.9 * 0.6 - 0.5 = 0.04;         A = 0.04 + 0.72 * 0.264 = 0.23008
    Stepping through t = 2 instead (textbook GAE) gives A = 1.223, 1.642 at t = 0, 1."""
    adv, ret = compute_gae(torch.tensor([[0., 0., 0., 1.]]), torch.tensor([[.5, .6, 9., .8]]),
                           torch.tensor([[1., 1., 0., 1.]]), gamma=0.9, lam=0.8)
    assert torch.allclose(adv, torch.tensor([[0.23008, 0.264, 0.0, 0.2]]), atol=1e-5), adv
    assert torch.allclose(ret, torch.tensor([[0.73008, 0.864, 0.0, 1.0]]), atol=1e-5), ret


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


def test_agrees_with_stored_numbers_on_random_multi_turn_batches():
    """Three (gamma, lam) settings on random multi-turn batches; the expected numbers were made once from an
    independent loop (course/hidden/make_fixtures.py) and stored in fixtures/ex4-gae.json."""
    for case in adapters.fixture("ex4-gae")["random_multi_turn"]:
        r, v, mask = (torch.tensor(case[k], dtype=torch.float32) for k in ("rewards", "values", "mask"))
        adv, ret = compute_gae(r, v, mask, case["gamma"], case["lam"])
        assert torch.allclose(adv, torch.tensor(case["advantages"]), atol=1e-5), (case["gamma"], case["lam"])
        assert torch.allclose(ret, torch.tensor(case["returns"]), atol=1e-5), (case["gamma"], case["lam"])
