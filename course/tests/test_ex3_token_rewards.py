"""Exercise 3 (visible tests): starpo.token_level_rewards, where the trajectory's reward sits.

token_level_rewards(rewards (B,), loss_mask (B, T), kl=None, kl_coef=0.0) -> (B, T)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

token_level_rewards = adapters.function("ex3-token-rewards")


WEIGHTS = {"test_the_reward_sits_on_the_last_sampled_token": 2, "test_kl_is_charged_on_every_sampled_token": 2,
           "test_agrees_with_stored_numbers_on_random_multi_turn_masks": 3}


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


def test_agrees_with_stored_numbers_on_random_multi_turn_masks():
    """Ten random batches; the expected outputs were made once from an independent loop
    (course/hidden/make_fixtures.py) and stored in fixtures/ex3-token-rewards.json."""
    for i, case in enumerate(adapters.fixture("ex3-token-rewards")["random_multi_turn"]):
        rewards, mask = torch.tensor(case["rewards"]), torch.tensor(case["mask"], dtype=torch.float32)
        out = token_level_rewards(rewards, mask)
        assert torch.allclose(out, torch.tensor(case["expected"]), atol=1e-6), (i, out)
        out = token_level_rewards(rewards, mask, kl=torch.tensor(case["kl"]), kl_coef=case["kl_coef"])
        assert torch.allclose(out, torch.tensor(case["expected_with_kl"]), atol=1e-6), (i, out)
