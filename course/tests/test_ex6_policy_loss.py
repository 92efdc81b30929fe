"""ex6-policy-loss: the clipped policy loss with clip-higher and dual clip (starpo.policy_loss)."""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

policy_loss = adapters.function("ex6-policy-loss")


def per_token_reference(ratio, adv, clip_low, clip_high, dual_clip=None):
    """One token of the PPO surrogate, written out with plain floats."""
    clipped_ratio = min(max(ratio, 1 - clip_low), 1 + clip_high)
    loss = max(-adv * ratio, -adv * clipped_ratio)
    if dual_clip is not None and adv < 0:
        loss = min(loss, -adv * dual_clip)
    return loss


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


def test_random_batch_matches_token_loop_seed_0():
    g = torch.Generator().manual_seed(0)
    logp = torch.randn(3, 5, generator=g) * 0.4
    old = torch.randn(3, 5, generator=g) * 0.4
    adv = torch.randn(3, 5, generator=g)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1], [1, 0, 1, 0, 1]], dtype=torch.float32)
    loss, m = policy_loss(logp, old, adv, mask, 0.2, 0.28)
    total, n, kl = 0.0, 0, 0.0
    for i in range(3):
        for t in range(5):
            if mask[i, t]:
                r = math.exp(logp[i, t].item() - old[i, t].item())
                total += per_token_reference(r, adv[i, t].item(), 0.2, 0.28)
                kl += old[i, t].item() - logp[i, t].item()
                n += 1
    assert abs(loss.item() - total / n) < 1e-5
    assert abs(m["approx_kl"].item() - kl / n) < 1e-5
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


def test_clipfrac_splits_into_low_and_high_seed_5():
    g = torch.Generator().manual_seed(5)
    logp = torch.randn(4, 6, generator=g) * 0.5
    adv = torch.randn(4, 6, generator=g)
    mask = (torch.rand(4, 6, generator=g) > 0.3).float()
    _, m = policy_loss(logp, torch.zeros(4, 6), adv, mask, 0.2, 0.28)
    low = high = n = 0
    for r, a, k in zip(logp.exp().flatten().tolist(), adv.flatten().tolist(), mask.flatten().tolist()):
        if k:
            n += 1
            low += a < 0 and r < 0.8
            high += a > 0 and r > 1.28
    assert low > 0 and high > 0
    assert abs(m["clipfrac_low"].item() - low / n) < 1e-6
    assert abs(m["clipfrac_high"].item() - high / n) < 1e-6
    assert abs(m["clipfrac"].item() - (low + high) / n) < 1e-6
