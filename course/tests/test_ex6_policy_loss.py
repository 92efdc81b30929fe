"""ex6-policy-loss: the clipped policy loss with clip-higher and dual clip (starpo.policy_loss)."""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

policy_loss = adapters.function("ex6-policy-loss")


WEIGHTS = {"test_docstring_worked_example": 3, "test_random_batch_matches_stored_numbers": 3,
           "test_gradient_is_zero_only_where_a_clip_is_active": 2, "test_clipfrac_splits_into_low_and_high": 2}


def test_docstring_worked_example():
    logp = torch.log(torch.tensor([[1.0, 0.5, 1.5, 4.0]]))
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    loss, m = policy_loss(logp, torch.zeros(1, 4), adv, torch.ones(1, 4), 0.2, 0.28, dual_clip=3.0)
    assert abs(loss.item() - (-1.0 + 0.8 - 1.28 + 3.0) / 4) < 1e-5
    assert abs(m["clipfrac"].item() - 0.5) < 1e-6
    assert abs(m["clipfrac_low"].item() - 0.25) < 1e-6
    assert abs(m["clipfrac_high"].item() - 0.25) < 1e-6
    assert abs(m["dual_clipfrac"].item() - 0.25) < 1e-6
    assert abs(m["approx_kl"].item() - (-math.log(0.5 * 1.5 * 4.0) / 4)) < 1e-4


def test_random_batch_matches_stored_numbers():
    """A random 3 x 5 batch; the expected loss and approx_kl were made once token by token
    (course/hidden/make_fixtures.py) and stored in fixtures/ex6-policy-loss.json."""
    case = adapters.fixture("ex6-policy-loss")["random_batch"]
    logp, old, adv, mask = (torch.tensor(case[k]) for k in ("logp", "old_logp", "advantages", "mask"))
    loss, m = policy_loss(logp, old, adv, mask.float(), 0.2, 0.28)
    assert abs(loss.item() - case["loss"]) < 1e-5
    assert abs(m["approx_kl"].item() - case["approx_kl"]) < 1e-5
    assert m["dual_clipfrac"].item() == 0.0


def test_gradient_is_zero_only_where_a_clip_is_active():
    ratios = torch.tensor([[1.1, 1.5, 0.6, 0.9]])  # inside, clipped high, clipped low, inside
    adv = torch.tensor([[1.0, 2.0, -1.0, -0.5]])
    logp = torch.log(ratios).requires_grad_()
    loss, _ = policy_loss(logp, torch.zeros(1, 4), adv, torch.ones(1, 4), 0.2, 0.28)
    loss.backward()
    # d/dlogp of -A * r is -A * r; divided by the 4 tokens
    expected = [-1.0 * 1.1 / 4, 0.0, 0.0, 0.5 * 0.9 / 4]
    np.testing.assert_allclose(logp.grad[0].numpy(), expected, atol=1e-6)


def test_clipfrac_splits_into_low_and_high():
    """A random 4 x 6 batch with tokens clipped on both sides; the fractions were counted once token by token
    (course/hidden/make_fixtures.py) and stored in fixtures/ex6-policy-loss.json."""
    case = adapters.fixture("ex6-policy-loss")["clipfrac_batch"]
    logp, adv, mask = (torch.tensor(case[k]) for k in ("logp", "advantages", "mask"))
    _, m = policy_loss(logp, torch.zeros(4, 6), adv, mask.float(), 0.2, 0.28)
    assert case["clipfrac_low"] > 0 and case["clipfrac_high"] > 0
    for key in ("clipfrac", "clipfrac_low", "clipfrac_high"):
        assert abs(m[key].item() - case[key]) < 1e-6, key


def test_metrics_are_detached_scalars():
    """The metrics are for logging: 0-dim, and no gradient may flow through them (a metric that holds the graph
    keeps every activation of the step alive until it is logged)."""
    logp = torch.randn(3, 5, requires_grad=True)
    _, m = policy_loss(logp, torch.zeros(3, 5), torch.randn(3, 5), torch.ones(3, 5), 0.2, 0.28, dual_clip=3.0)
    assert set(m) == {"clipfrac", "clipfrac_low", "clipfrac_high", "approx_kl", "dual_clipfrac"}
    for key, value in m.items():
        assert value.dim() == 0 and not value.requires_grad, key


def test_inf_on_a_padded_token_does_not_turn_the_loss_into_nan():
    """Padding may hold anything, inf included: multiplying by the mask gives inf * 0 = nan, selecting with
    torch.where does not. Token 0: ratio 1, A = 2 -> -2. Token 1 is padding."""
    adv = torch.tensor([[2.0, float("inf")]])
    loss, m = policy_loss(torch.zeros(1, 2), torch.zeros(1, 2), adv, torch.tensor([[1.0, 0.0]]), 0.2, 0.28)
    assert loss.item() == -2.0
    assert all(torch.isfinite(v) for v in m.values())
