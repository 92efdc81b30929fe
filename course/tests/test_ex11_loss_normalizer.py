"""Exercise 11 (visible tests): ragen_mini.loss_normalizer, what each micro-batch's summed loss is divided by.

loss_normalizer(mini_batch_mask (b, T-1), micro_batch_mask (b', T-1), num_micro_batches, loss_agg) -> 0-dim tensor
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

loss_normalizer = adapters.function("ex11-loss-normalizer")

WEIGHTS = {"test_the_docstring_example": 3, "test_accumulated_losses_are_the_mini_batch_token_mean": 3,
           "test_agrees_with_stored_numbers_on_random_splits": 2}

# A mini-batch of three rows with 2, 5 and 1 response tokens, in micro-batches [rows 0, 1] and [row 2].
MINI = torch.tensor([[1., 1., 0., 0., 0., 0.],
                     [0., 1., 1., 1., 1., 1.],
                     [0., 0., 0., 1., 0., 0.]])
MICRO = [MINI[:2], MINI[2:]]


def normalizers(loss_agg, mini=MINI, micro=MICRO):
    return [float(loss_normalizer(mini, m, len(micro), loss_agg)) for m in micro]


def test_the_docstring_example():
    assert normalizers("token-mean") == [8.0, 8.0]  # 2 + 5 + 1 tokens in the mini-batch
    assert normalizers("micro-batch-mean") == [14.0, 2.0]  # 7 x 2 micro-batches, 1 x 2
    out = loss_normalizer(MINI, MICRO[0], 2, "token-mean")
    assert torch.is_tensor(out) and out.dim() == 0


def test_token_mean_does_not_depend_on_the_micro_batch():
    """Every micro-batch of a mini-batch divides by the same number, however its rows are split."""
    for micro in ([MINI[:1], MINI[1:]], [MINI[:1], MINI[1:2], MINI[2:]], [MINI]):
        assert set(normalizers("token-mean", micro=micro)) == {8.0}


def test_empty_masks_give_one_not_zero():
    """A mini-batch, or a micro-batch, without a response token: its loss is 0 / 1 = 0, not 0 / 0 = NaN."""
    empty = torch.zeros(2, 5)
    assert float(loss_normalizer(empty, empty[:1], 2, "token-mean")) == 1.0
    assert float(loss_normalizer(MINI, torch.zeros(1, 6), 3, "micro-batch-mean")) == 3.0  # 1 x 3


def test_accumulated_losses_are_the_mini_batch_token_mean():
    """Per-token losses summed over each micro-batch and divided by its normalizer, then added up (what the
    gradient accumulation adds up). Tokens: row 0: 1, 3; row 1: 2, 2, 2, 2, 2; row 2: 7.
    token-mean: (4 + 10) / 8 + 7 / 8 = 21 / 8, the mean of the 8 tokens.
    micro-batch-mean: 14 / 14 + 7 / 2 = 4.5, the mean of the micro-batches' means (2 and 7)."""
    losses = torch.tensor([[1., 3., 9., 9., 9., 9.],
                           [9., 2., 2., 2., 2., 2.],
                           [9., 9., 9., 7., 9., 9.]])  # 9 off the response tokens: never counted
    for loss_agg, expected in (("token-mean", 21 / 8), ("micro-batch-mean", 4.5)):
        total = sum(float(torch.where(m.bool(), x, 0).sum() / loss_normalizer(MINI, m, 2, loss_agg))
                    for x, m in zip((losses[:2], losses[2:]), MICRO))
        assert abs(total - expected) < 1e-6, loss_agg


def test_the_gradient_of_each_token_is_one_over_the_normalizer():
    """The accumulated gradient of the summed per-token losses: 1/8 on every token with token-mean; with
    micro-batch-mean 1/14 on the first micro-batch's tokens and 1/2 on the last one's."""
    for loss_agg, expected in (("token-mean", [1 / 8, 1 / 8]), ("micro-batch-mean", [1 / 14, 1 / 2])):
        x = torch.zeros(3, 6, requires_grad=True)
        for rows, m in zip((slice(0, 2), slice(2, 3)), MICRO):
            (torch.where(m.bool(), x[rows], 0).sum() / loss_normalizer(MINI, m, 2, loss_agg)).backward()
        assert torch.allclose(x.grad[:2], MICRO[0] * expected[0]), loss_agg
        assert torch.allclose(x.grad[2:], MICRO[1] * expected[1]), loss_agg


def test_agrees_with_stored_numbers_on_random_splits():
    """Random multi-turn masks cut into random micro-batches; the normalizers were counted once
    (course/hidden/make_fixtures.py) and stored in fixtures/ex11-loss-normalizer.json."""
    for case in adapters.fixture("ex11-loss-normalizer")["random_splits"]:
        mini = torch.tensor(case["mask"], dtype=torch.float32)
        micro = [mini[a:b] for a, b in case["slices"]]
        for loss_agg in ("token-mean", "micro-batch-mean"):
            assert normalizers(loss_agg, mini, micro) == case[loss_agg], (case["slices"], loss_agg)
