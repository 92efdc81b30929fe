"""ex6-policy-loss, hidden: dual clip, loss_normalizer, clip-higher, huge ratios, empty mask."""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

policy_loss = adapters.function("ex6-policy-loss")


def reference(ratio, adv, mask, clip_low, clip_high, dual_clip=None, normalizer=None):
    """numpy surrogate: per-token loss, summed over the mask, over the normalizer; dual-clip fraction."""
    ratio, adv, mask = (np.asarray(x, dtype=np.float64) for x in (ratio, adv, mask))
    per = np.maximum(-adv * ratio, -adv * np.clip(ratio, 1 - clip_low, 1 + clip_high))
    dual = np.zeros_like(per, dtype=bool)
    if dual_clip is not None:
        dual = (adv < 0) & (per > -adv * dual_clip)
        per = np.where(dual, -adv * dual_clip, per)
    n = mask.sum() if normalizer is None else normalizer
    return (per * mask).sum() / max(n, 1), (dual * mask).sum() / max(mask.sum(), 1)


def test_dual_clip_random_seed_31():
    g = torch.Generator().manual_seed(31)
    logp = torch.randn(5, 7, generator=g) * 1.5  # many ratios far above 3
    adv = torch.randn(5, 7, generator=g)
    mask = (torch.rand(5, 7, generator=g) > 0.2).float()
    loss, m = policy_loss(logp, torch.zeros(5, 7), adv, mask, 0.2, 0.28, dual_clip=3.0)
    ref_loss, ref_dual = reference(logp.exp().numpy(), adv.numpy(), mask.numpy(), 0.2, 0.28, 3.0)
    assert ref_dual > 0
    assert abs(loss.item() - ref_loss) < 1e-4 * max(1.0, abs(ref_loss))
    assert abs(m["dual_clipfrac"].item() - ref_dual) < 1e-6


def test_loss_normalizer_makes_micro_batches_add_up():
    g = torch.Generator().manual_seed(8)
    logp, old = torch.randn(6, 4, generator=g) * 0.3, torch.randn(6, 4, generator=g) * 0.3
    adv = torch.randn(6, 4, generator=g)
    mask = torch.ones(6, 4)
    mask[0, 2:] = 0
    mask[4, 1:] = 0
    whole, _ = policy_loss(logp, old, adv, mask, 0.2, 0.28, 2.5)
    n = int(mask.sum())
    parts = sum(policy_loss(logp[s], old[s], adv[s], mask[s], 0.2, 0.28, 2.5, loss_normalizer=n)[0]
                for s in (slice(0, 1), slice(1, 4), slice(4, 6)))
    assert abs(parts.item() - whole.item()) < 1e-5
    ref, _ = reference((logp - old).exp().numpy(), adv.numpy(), mask.numpy(), 0.2, 0.28, 2.5, normalizer=50)
    fixed, _ = policy_loss(logp, old, adv, mask, 0.2, 0.28, 2.5, loss_normalizer=50)
    assert abs(fixed.item() - ref) < 1e-5


def test_clip_higher_lets_a_good_token_grow_further():
    logp = torch.log(torch.tensor([[1.25]])).requires_grad_()
    sym, m_sym = policy_loss(logp, torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1), 0.2, 0.2)
    sym.backward()
    assert abs(sym.item() + 1.2) < 1e-5 and logp.grad.item() == 0.0 and m_sym["clipfrac_high"].item() == 1.0
    logp.grad = None
    hi, m_hi = policy_loss(logp, torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1), 0.2, 0.28)
    hi.backward()
    assert abs(hi.item() + 1.25) < 1e-5 and abs(logp.grad.item() + 1.25) < 1e-5
    assert m_hi["clipfrac"].item() == 0.0


def test_huge_log_ratio_is_clamped_and_finite():
    logp, old = torch.tensor([[60.0, -60.0]]), torch.zeros(1, 2)
    adv = torch.tensor([[-1.0, 1.0]])
    loss, m = policy_loss(logp, old, adv, torch.tensor([[1.0, 0.0]]), 0.2, 0.28)
    assert torch.isfinite(loss)
    assert abs(loss.item() / math.exp(20.0) - 1.0) < 1e-4  # ratio clamped to exp(20)
    assert abs(m["approx_kl"].item() + 20.0) < 1e-4
    dual, _ = policy_loss(logp, old, adv, torch.ones(1, 2), 0.2, 0.28, dual_clip=3.0)
    assert abs(dual.item() - (3.0 + 0.0) / 2) < 1e-5  # token 2: A > 0, ratio ~0: max(-r, -0.8) ~ 0


def test_empty_mask_gives_zero_not_nan():
    x = torch.randn(2, 3)
    empty = torch.zeros(2, 3)
    for normalizer in (None, 0):
        loss, m = policy_loss(x, torch.randn(2, 3), torch.randn(2, 3), empty, 0.2, 0.28, 3.0,
                              loss_normalizer=normalizer)
        assert loss.item() == 0.0
        assert all(v.item() == 0.0 for v in m.values())


def test_metrics_are_detached_with_dual_clip_and_a_normalizer():
    logp = torch.randn(2, 4, requires_grad=True)
    _, m = policy_loss(logp, torch.zeros(2, 4), -torch.ones(2, 4), torch.ones(2, 4), 0.2, 0.28, dual_clip=2.0,
                       loss_normalizer=16)
    assert all(not v.requires_grad and v.dim() == 0 for v in m.values())


def test_nan_and_inf_in_padding_stay_out_of_the_loss():
    # token 0: ratio e^0.1 = 1.10517, A = -1: -A r = 1.10517 (inside the clip); tokens 1 and 2 are padding
    adv = torch.tensor([[-1.0, float("nan"), -float("inf")]])
    loss, m = policy_loss(torch.tensor([[0.1, 0.0, 0.0]]), torch.zeros(1, 3), adv, torch.tensor([[1.0, 0.0, 0.0]]),
                          0.2, 0.28, dual_clip=3.0, loss_normalizer=2)
    assert abs(loss.item() - 1.10517 / 2) < 1e-5
    assert all(torch.isfinite(v) for v in m.values())
