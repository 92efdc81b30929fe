"""Exercise 4 (visible tests): starpo.compute_gae, GAE that skips observation tokens.

compute_gae(token_rewards (B, T), values (B, T), response_mask (B, T), gamma, lam) -> (advantages, returns)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

compute_gae = adapters.function("ex4-gae")


WEIGHTS = {"test_the_worked_example": 3, "test_gamma_lam_one_gives_reward_to_go_minus_value": 2,
           "test_masked_positions_get_zero": 2, "test_agrees_with_stored_numbers_on_random_multi_turn_batches": 3}


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


def test_agrees_with_stored_numbers_on_random_multi_turn_batches():
    """Three (gamma, lam) settings on random multi-turn batches; the expected numbers were made once from an
    independent loop (course/hidden/make_fixtures.py) and stored in fixtures/ex4-gae.json."""
    for case in adapters.fixture("ex4-gae")["random_multi_turn"]:
        r, v, mask = (torch.tensor(case[k], dtype=torch.float32) for k in ("rewards", "values", "mask"))
        adv, ret = compute_gae(r, v, mask, case["gamma"], case["lam"])
        assert torch.allclose(adv, torch.tensor(case["advantages"]), atol=1e-5), (case["gamma"], case["lam"])
        assert torch.allclose(ret, torch.tensor(case["returns"]), atol=1e-5), (case["gamma"], case["lam"])
