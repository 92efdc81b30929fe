"""ex7-value-loss, hidden: other seeds and clip ranges, loss_normalizer, unmoved critic, empty mask."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

value_loss = adapters.function("ex7-value-loss")


def reference(values, old, returns, mask, c, normalizer=None):
    values, old, returns, mask = (np.asarray(x, dtype=np.float64) for x in (values, old, returns, mask))
    v_clip = np.clip(values, old - c, old + c)
    a, b = (values - returns) ** 2, (v_clip - returns) ** 2
    n = mask.sum() if normalizer is None else normalizer
    return (0.5 * np.maximum(a, b) * mask).sum() / max(n, 1), ((b > a) * mask).sum() / max(mask.sum(), 1)


def test_clip_range_0_2_seed_7():
    g = torch.Generator().manual_seed(7)
    old = torch.randn(4, 9, generator=g)
    values = old + 0.5 * torch.randn(4, 9, generator=g)
    returns = old + torch.randn(4, 9, generator=g)
    mask = (torch.rand(4, 9, generator=g) > 0.25).float()
    loss, m = value_loss(values, old, returns, mask, clip_range=0.2)
    ref_loss, ref_frac = reference(values.numpy(), old.numpy(), returns.numpy(), mask.numpy(), 0.2)
    assert 0 < ref_frac < 1
    assert abs(loss.item() - ref_loss) < 1e-5
    assert abs(m["vf_clipfrac"].item() - ref_frac) < 1e-6


def test_loss_normalizer_micro_batches_sum_to_the_token_mean():
    g = torch.Generator().manual_seed(11)
    old, values, returns = (torch.randn(5, 4, generator=g) for _ in range(3))
    mask = torch.ones(5, 4)
    mask[1, 3:] = 0
    mask[3, :] = 0
    whole, _ = value_loss(values, old, returns, mask, 0.5)
    n = int(mask.sum())
    parts = sum(value_loss(values[s], old[s], returns[s], mask[s], 0.5, loss_normalizer=n)[0]
                for s in (slice(0, 2), slice(2, 3), slice(3, 5)))
    assert abs(parts.item() - whole.item()) < 1e-5
    fixed, _ = value_loss(values, old, returns, mask, 0.5, loss_normalizer=40)
    assert abs(fixed.item() - reference(values, old, returns, mask, 0.5, normalizer=40)[0]) < 1e-5


def test_unmoved_critic_is_half_squared_error():
    values = torch.tensor([[0.5, -2.0, 1.0, 4.0]])
    returns = torch.tensor([[1.5, 0.0, 1.0, 1.0]])
    loss, m = value_loss(values, values.clone(), returns, torch.tensor([[1., 1., 1., 0.]]), clip_range=0.1)
    assert abs(loss.item() - 0.5 * (1.0 + 4.0 + 0.0) / 3) < 1e-6
    assert m["vf_clipfrac"].item() == 0.0


def test_empty_mask_gives_zero_not_nan():
    x = torch.randn(2, 3)
    for normalizer in (None, 0):
        loss, m = value_loss(x, torch.randn(2, 3), torch.randn(2, 3), torch.zeros(2, 3), 0.5, normalizer)
        assert loss.item() == 0.0 and m["vf_clipfrac"].item() == 0.0
