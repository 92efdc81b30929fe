"""Exercise 11 (hidden tests): ragen_mini.loss_normalizer on other splits, dtypes and edge cases."""
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

loss_normalizer = adapters.function("ex11-loss-normalizer")

WEIGHTS = {"test_agrees_with_counting_on_random_splits": 3, "test_accumulated_gradient_is_the_mini_batch_mean": 2}


def test_one_micro_batch_is_the_token_count_in_both_modes():
    mask = torch.tensor([[0., 1., 1.], [1., 0., 1.]])
    for loss_agg in ("token-mean", "micro-batch-mean"):
        assert float(loss_normalizer(mask, mask, 1, loss_agg)) == 4.0, loss_agg


def test_the_micro_batch_does_not_change_token_mean_and_the_count_of_micro_batches_scales_the_other():
    mini = torch.tensor([[1., 1., 1., 0.], [0., 0., 1., 1.], [1., 0., 0., 0.], [1., 1., 1., 1.]])
    for micro in (mini[:1], mini[1:3], mini[3:]):
        assert float(loss_normalizer(mini, micro, 3, "token-mean")) == 10.0
    assert float(loss_normalizer(mini, mini[1:3], 3, "micro-batch-mean")) == 9.0  # 3 tokens x 3
    assert float(loss_normalizer(mini, mini[1:3], 5, "micro-batch-mean")) == 15.0
    assert float(loss_normalizer(mini, mini[3:], 2, "micro-batch-mean")) == 8.0


def test_an_empty_mini_batch_gives_one_in_both_modes():
    empty = torch.zeros(3, 4)
    assert float(loss_normalizer(empty, empty[:2], 2, "token-mean")) == 1.0
    assert float(loss_normalizer(empty, empty[:2], 2, "micro-batch-mean")) == 2.0


def test_float64_and_boolean_like_masks():
    mini = torch.tensor([[1., 0., 1.], [1., 1., 1.]], dtype=torch.float64)
    out = loss_normalizer(mini, mini[1:], 2, "token-mean")
    assert torch.is_tensor(out) and out.dim() == 0 and float(out) == 5.0
    assert float(loss_normalizer(mini, mini[:1], 2, "micro-batch-mean")) == 4.0


def count(mask):
    return sum(1 for row in mask for m in row if m)


def test_agrees_with_counting_on_random_splits():
    rng = random.Random(11)
    for _ in range(40):
        B, T = rng.randint(1, 8), rng.randint(1, 15)
        mask = [[int(rng.random() < 0.4) for _ in range(T)] for _ in range(B)]
        cuts = sorted(rng.sample(range(1, B), rng.randint(0, B - 1))) if B > 1 else []
        bounds = list(zip([0, *cuts], [*cuts, B]))
        mini = torch.tensor(mask, dtype=torch.float32)
        for a, b in bounds:
            want_token_mean = max(count(mask), 1)
            want_micro_mean = max(count(mask[a:b]), 1) * len(bounds)
            assert float(loss_normalizer(mini, mini[a:b], len(bounds), "token-mean")) == want_token_mean
            assert float(loss_normalizer(mini, mini[a:b], len(bounds), "micro-batch-mean")) == want_micro_mean


def test_accumulated_gradient_is_the_mini_batch_mean():
    """Random per-token losses, accumulated over micro-batches: the total is the plain mean over the mini-batch's
    response tokens (token-mean), and the mean of each micro-batch's own mean (micro-batch-mean)."""
    rng = random.Random(5)
    for _ in range(10):
        B, T = rng.randint(2, 6), rng.randint(3, 10)
        mask = [[int(rng.random() < 0.5) for _ in range(T)] for _ in range(B)]
        for row in mask:
            row[rng.randrange(T)] = 1
        losses = [[rng.uniform(-2, 2) for _ in range(T)] for _ in range(B)]
        cut = rng.randint(1, B - 1)
        mini, x = torch.tensor(mask, dtype=torch.float64), torch.tensor(losses, dtype=torch.float64)
        parts = [(0, cut), (cut, B)]
        means = [sum(losses[b][t] for b in range(p, q) for t in range(T) if mask[b][t]) / count(mask[p:q])
                 for p, q in parts]
        everything = sum(losses[b][t] for b in range(B) for t in range(T) if mask[b][t]) / count(mask)
        for loss_agg, want in (("token-mean", everything), ("micro-batch-mean", sum(means) / 2)):
            total = sum(float((x[p:q] * mini[p:q]).sum() / loss_normalizer(mini, mini[p:q], 2, loss_agg))
                        for p, q in parts)
            assert abs(total - want) < 1e-9, loss_agg
