"""Exercise 12 (hidden tests): ragen_mini.update against plain loops on random batches, epochs, mini- and micro-batch
sizes and clip norms, with the visible tests' stand-in models and losses."""
import math
import os
import random
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import adapters  # noqa: E402
from test_ex12_update import WIDTH, make_batch, make_cfg, run  # noqa: E402

update = adapters.function("ex12-update")

WEIGHTS = {"test_agrees_with_loops_on_random_batches": 4}


def reference_update(case, mini_batch_size, micro_batch_size, epochs, grad_clip, seed, vocab=WIDTH):
    """Plain loops: the actor's and the critic's weights after the update, and the rows of each actor micro-batch.
    A mini-batch's gradient on w[v] sums -advantage / n (actor) and (w[v] - return) / n (critic) over its
    response tokens v, n of them; its norm is clipped to grad_clip (torch's factor max_norm / (norm + 1e-6))."""
    tokens, mask, advantages, returns = case["tokens"], case["mask"], case["advantages"], case["returns"]
    B, generator = len(tokens), torch.Generator().manual_seed(seed)
    actor, critic, calls = [0.0] * vocab, [0.0] * vocab, []
    for _ in range(epochs):
        order = torch.randperm(B, generator=generator).tolist()
        for start in range(0, B, mini_batch_size):
            mini = order[start:start + mini_batch_size]
            calls += [mini[i:i + micro_batch_size] for i in range(0, len(mini), micro_batch_size)]
            n = max(1, sum(m for b in mini for m in mask[b]))
            grad_actor, grad_critic = [0.0] * vocab, [0.0] * vocab
            for b in mini:
                for t, v in enumerate(tokens[b]):
                    if mask[b][t]:
                        grad_actor[v] -= advantages[b][t] / n
                        grad_critic[v] += (critic[v] - returns[b][t]) / n
            for weights, grad in ((actor, grad_actor), (critic, grad_critic)):
                scale = min(1.0, grad_clip / (math.sqrt(sum(g * g for g in grad)) + 1e-6))
                weights[:] = [w - scale * g for w, g in zip(weights, grad)]
    return actor, critic, calls


def random_case(rng, B):
    mask = [[int(rng.random() < 0.5) for _ in range(WIDTH - 1)] for _ in range(B)]
    for row in mask:
        row[rng.randrange(WIDTH - 1)] = 1
    return {"tokens": [[rng.randrange(WIDTH) for _ in range(WIDTH - 1)] for _ in range(B)], "mask": mask,
            "advantages": [[round(rng.uniform(-2, 2), 3) * m for m in row] for row in mask],
            "returns": [[round(rng.uniform(-1, 1), 3) * m for m in row] for row in mask]}


def test_agrees_with_loops_on_random_batches(monkeypatch):
    rng = random.Random(12)
    for _ in range(6):
        B = rng.randint(1, 7)
        mini, epochs, clip = rng.randint(1, B), rng.randint(1, 3), rng.choice([0.1, 0.7, 1e6])
        micro, seed, case = rng.randint(1, mini), rng.randrange(100), random_case(rng, B)
        actor, critic, _, events = run(monkeypatch, make_batch(**case), make_cfg(mini, micro, epochs, clip), seed=seed)
        want_actor, want_critic, calls = reference_update(case, mini, micro, epochs, clip, seed)
        assert [rows for name, rows in events if name == "actor forward"] == calls
        assert torch.allclose(actor.w.detach().double(), torch.tensor(want_actor, dtype=torch.float64), atol=1e-5)
        assert torch.allclose(critic.w.detach().double(), torch.tensor(want_critic, dtype=torch.float64), atol=1e-5)


def test_every_epoch_draws_a_new_order_and_covers_every_row_once(monkeypatch):
    case = random_case(random.Random(2), 6)
    *_, events = run(monkeypatch, make_batch(**case), make_cfg(mini=2, micro=2, epochs=3), seed=1)
    rows = [rows for name, rows in events if name == "actor forward"]
    assert [len(r) for r in rows] == [2] * 9
    epochs = [sum(rows[i:i + 3], []) for i in (0, 3, 6)]
    assert all(sorted(e) == list(range(6)) for e in epochs) and len({tuple(e) for e in epochs}) == 3


def test_the_last_mini_batch_may_be_smaller(monkeypatch):
    case = random_case(random.Random(3), 5)
    *_, events = run(monkeypatch, make_batch(**case), make_cfg(mini=2, micro=2, epochs=1), seed=0)
    steps = [e for e in events if e[1] == "step"]
    assert steps == [("actor", "step"), ("critic", "step")] * 3
    assert [len(rows) for name, rows in events if name == "critic forward"] == [2, 2, 1]


def test_the_micro_batches_share_one_step_and_the_critic_uses_the_same_ones(monkeypatch):
    case = random_case(random.Random(4), 4)
    *_, events = run(monkeypatch, make_batch(**case), make_cfg(mini=4, micro=1), seed=5)
    actor_rows = [rows for name, rows in events if name == "actor forward"]
    critic_rows = [rows for name, rows in events if name == "critic forward"]
    assert actor_rows == critic_rows and len(actor_rows) == 4
    assert [e for e in events if e[1] == "step"] == [("actor", "step"), ("critic", "step")]


def test_a_non_finite_critic_gradient_skips_only_the_critic(monkeypatch):
    case = random_case(random.Random(6), 3)
    case["returns"][0] = [float("inf")] * (WIDTH - 1)
    with pytest.warns(UserWarning, match="non-finite critic gradient norm"):
        actor, critic, metrics, _ = run(monkeypatch, make_batch(**case), make_cfg(mini=3, micro=3), seed=0)
    assert (critic.w.detach() == 0).all() and metrics["train/critic_skipped_updates"] == 1
    assert actor.w.detach().abs().sum() > 0 and "train/actor_skipped_updates" not in metrics
