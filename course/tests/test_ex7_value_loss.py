"""ex7-value-loss: the clipped critic loss (starpo.value_loss)."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

value_loss = adapters.function("ex7-value-loss")


def token_reference(v, v_old, ret, c):
    """0.5 * max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2) and whether the clipped term wins."""
    v_clip = min(max(v, v_old - c), v_old + c)
    a, b = (v - ret) ** 2, (v_clip - ret) ** 2
    return 0.5 * max(a, b), b > a


def test_docstring_example():
    loss, m = value_loss(torch.tensor([[1., 2.]]), torch.tensor([[1., 1.]]),
                         torch.tensor([[0., 3.]]), torch.ones(1, 2), clip_range=0.5)
    assert abs(loss.item() - 0.8125) < 1e-6
    assert abs(m["vf_clipfrac"].item() - 0.5) < 1e-6


def test_random_batch_matches_token_loop_seed_0():
    g = torch.Generator().manual_seed(0)
    old = torch.randn(3, 6, generator=g)
    values = old + torch.randn(3, 6, generator=g)  # many moves beyond 0.5
    returns = values + 0.3 * torch.randn(3, 6, generator=g)  # the critic moved toward the returns
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0]], dtype=torch.float32)
    loss, m = value_loss(values, old, returns, mask, clip_range=0.5)
    total, clipped, n = 0.0, 0, 0
    for v, vo, r, k in zip(values.flatten().tolist(), old.flatten().tolist(), returns.flatten().tolist(),
                           mask.flatten().tolist()):
        if k:
            per, was_clipped = token_reference(v, vo, r, 0.5)
            total, clipped, n = total + per, clipped + was_clipped, n + 1
    assert clipped > 0
    assert abs(loss.item() - total / n) < 1e-5
    assert abs(m["vf_clipfrac"].item() - clipped / n) < 1e-6


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
