"""ex7-value-loss: the clipped critic loss (starpo.value_loss)."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

value_loss = adapters.function("ex7-value-loss")


WEIGHTS = {"test_docstring_example": 3, "test_random_batch_matches_stored_numbers": 3,
           "test_gradient_vanishes_on_clipped_tokens": 2}


def test_docstring_example():
    loss, m = value_loss(torch.tensor([[1., 2.]]), torch.tensor([[1., 1.]]),
                         torch.tensor([[0., 3.]]), torch.ones(1, 2), clip_range=0.5)
    assert abs(loss.item() - 0.8125) < 1e-6
    assert abs(m["vf_clipfrac"].item() - 0.5) < 1e-6


def test_random_batch_matches_stored_numbers():
    """A random 3 x 6 batch where many values moved beyond the clip range; the expected loss and clip fraction
    were made once token by token (course/hidden/make_fixtures.py) and stored in fixtures/ex7-value-loss.json."""
    case = adapters.fixture("ex7-value-loss")["random_batch"]
    values, old, returns, mask = (torch.tensor(case[k]) for k in ("values", "old_values", "returns", "mask"))
    loss, m = value_loss(values, old, returns, mask.float(), clip_range=case["clip_range"])
    assert case["vf_clipfrac"] > 0
    assert abs(loss.item() - case["loss"]) < 1e-5
    assert abs(m["vf_clipfrac"].item() - case["vf_clipfrac"]) < 1e-6


def test_inf_on_a_padded_token_does_not_turn_the_loss_into_nan():
    """Token 0: V = 1, R = 3, unmoved: 0.5 * 2^2 = 2. Token 1 is padding that holds inf."""
    loss, m = value_loss(torch.tensor([[1.0, float("inf")]]), torch.tensor([[1.0, 0.0]]), torch.tensor([[3.0, 0.0]]),
                         torch.tensor([[1.0, 0.0]]), clip_range=0.5)
    assert loss.item() == 2.0 and m["vf_clipfrac"].item() == 0.0


def test_gradient_vanishes_on_clipped_tokens():
    old = torch.tensor([[0.0, 0.0, 0.0]])
    values = torch.tensor([[0.3, 2.0, -1.0]], requires_grad=True)
    returns = torch.tensor([[1.0, -1.0, 0.5]])
    # token 0 moved inside the range; tokens 1 and 2 moved away from their returns, so the unclipped
    # error is the larger one: (2+1)^2 > (0.5+1)^2 and (-1-.5)^2 > (-.5-.5)^2. All gradients flow.
    loss, m = value_loss(values, old, returns, torch.ones(1, 3), clip_range=0.5)
    loss.backward()
    np.testing.assert_allclose(values.grad[0].numpy(), [(0.3 - 1.0) / 3, (2.0 + 1.0) / 3, (-1.0 - 0.5) / 3],
                               atol=1e-6)
    assert m["vf_clipfrac"].item() == 0.0
    values2 = torch.tensor([[2.0]], requires_grad=True)  # moved 2 from 1, clipped to 1.5, return 3
    loss2, m2 = value_loss(values2, torch.tensor([[1.0]]), torch.tensor([[3.0]]), torch.ones(1, 1), 0.5)
    loss2.backward()
    assert abs(loss2.item() - 0.5 * 2.25) < 1e-6 and values2.grad.item() == 0.0
    assert m2["vf_clipfrac"].item() == 1.0
