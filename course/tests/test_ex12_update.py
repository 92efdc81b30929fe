"""Exercise 12 (visible tests): ragen_mini.update (and ragen_mini.clipped_step), the update step: epochs of shuffled
mini-batches, gradient accumulation over micro-batches, the actor's step then the critic's, gradient clipping.

update(batch, actor, critic, actor_opt, critic_opt, cfg, device, generator) -> the train/* metrics

The models, their scoring and losses are stand-ins here, so that only the update's plumbing is graded (your
token_logprobs, actor_loss, value_loss and loss_normalizer are not called): a model is one number per token
id, w; a response token v scores w[v] (its "log-prob", or its value); the actor's loss is
-sum(advantage x w[v]) / normalizer and the critic's 0.5 x sum((w[v] - return)^2) / normalizer, the normalizer
being the mini-batch's token count. With plain SGD at learning rate 1 a step adds minus the gradient to w.
"""
import os
import sys
from types import SimpleNamespace

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

update = adapters.function("ex12-update")
ragen_mini = sys.modules[update.__module__]

WEIGHTS = {"test_one_mini_batch_of_two_micro_batches_by_hand": 3, "test_the_actor_steps_before_the_critic": 2,
           "test_the_gradient_is_clipped_before_the_step": 2, "test_agrees_with_stored_weights_over_epochs": 3}
WIDTH = 8  # every row is 8 tokens long: the micro-batches keep the batch's width
CPU = torch.device("cpu")


class Table(torch.nn.Module):
    """A stand-in model: one parameter per token id."""

    def __init__(self, vocab=WIDTH, start=0.0):
        super().__init__()
        self.w = torch.nn.Parameter(torch.full((vocab,), start))


class Recorder:
    """Stand-ins for the functions update() calls, recording the calls in order in `events`."""

    def __init__(self, monkeypatch):
        self.events = []
        monkeypatch.setattr(ragen_mini, "token_logprobs", self.token_logprobs)
        monkeypatch.setattr(ragen_mini, "token_values", self.token_values)
        monkeypatch.setattr(ragen_mini, "loss_normalizer", self.loss_normalizer)
        monkeypatch.setattr(ragen_mini.starpo, "actor_loss", self.actor_loss)
        monkeypatch.setattr(ragen_mini.starpo, "value_loss", self.value_loss)

    def token_logprobs(self, actor, ids, mask, cfg, with_entropy=False, temperature=None):
        self.events.append(("actor forward", ids[:, 0].tolist()))  # column 0 holds the row's number
        logp = actor.w[ids[:, 1:]] * mask
        return logp, torch.zeros_like(logp)

    def token_values(self, critic, ids, mask):
        self.events.append(("critic forward", ids[:, 0].tolist()))
        return critic.w[ids[:, 1:]] * mask

    @staticmethod
    def loss_normalizer(mini_batch_mask, micro_batch_mask, num_micro_batches, loss_agg):
        return mini_batch_mask.sum()

    def actor_loss(self, logp, entropy, old_logp, advantages, loss_mask, cfg, loss_normalizer, ref_logp=None):
        self.events.append(("actor loss", int(loss_mask.sum())))
        loss = -(advantages * logp * loss_mask).sum() / loss_normalizer
        return loss, {"policy_loss": loss.detach(), "tokens": loss_mask.sum()}

    def value_loss(self, values, old_values, returns, loss_mask, clip_range, loss_normalizer=None):
        self.events.append(("critic loss", int(loss_mask.sum())))
        loss = 0.5 * ((values - returns) ** 2 * loss_mask).sum() / loss_normalizer
        return loss, {"vf_clipfrac": loss_mask.sum() / 10}


def make_batch(tokens, mask, advantages, returns=None):
    """Rows of WIDTH token ids: column 0 is the row's number, then the row's tokens; mask, advantages and
    returns are (B, WIDTH-1) lists."""
    B = len(tokens)
    ids = torch.tensor([[b, *row] for b, row in enumerate(tokens)])
    zeros = torch.zeros(B, WIDTH - 1)
    return ragen_mini.Batch(input_ids=ids, attention_mask=torch.ones(B, WIDTH, dtype=torch.long),
                            loss_mask=torch.tensor(mask, dtype=torch.float32), rewards=torch.zeros(B),
                            group_ids=torch.arange(B), old_logp=zeros.clone(), values=zeros.clone(),
                            ref_logp=zeros.clone(), advantages=torch.tensor(advantages, dtype=torch.float32),
                            returns=zeros.clone() if returns is None else torch.tensor(returns, dtype=torch.float32))


def make_cfg(mini=2, micro=1, epochs=1, grad_clip=1e6):
    return SimpleNamespace(algo=SimpleNamespace(ppo_epochs=epochs, mini_batch_size=mini, micro_batch_size=micro,
                                                micro_batch_tokens=0, grad_clip=grad_clip, loss_agg="token-mean",
                                                value_clip=0.5),
                           rollout=SimpleNamespace(temperature=1.0, engine="hf"))


def spied(model, name, events, lr=1.0):
    """SGD on the model, its steps and gradient resets recorded in `events`."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    step, zero_grad = optimizer.step, optimizer.zero_grad
    optimizer.step = lambda *a, **k: (events.append((name, "step")), step(*a, **k))[1]
    optimizer.zero_grad = lambda *a, **k: (events.append((name, "zero_grad")), zero_grad(*a, **k))[1]
    return optimizer


# Two rows: row 0 samples tokens 1, 2 (advantages 1, 2; returns 1, 1), row 1 samples 7, 6, 5 (advantages
# 3, -1, 2; returns 2, 2, 2): 5 tokens in the mini-batch, one micro-batch per row.
TWO_ROWS = dict(tokens=[[1, 2, 0, 0, 0, 0, 0], [7, 6, 5, 0, 0, 0, 0]],
                mask=[[1, 1, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0]],
                advantages=[[1, 2, 0, 0, 0, 0, 0], [3, -1, 2, 0, 0, 0, 0]],
                returns=[[1, 1, 0, 0, 0, 0, 0], [2, 2, 2, 0, 0, 0, 0]])


def run(monkeypatch, batch, cfg, critic=True, seed=0):
    recorder = Recorder(monkeypatch)
    actor, value = Table(), Table() if critic else None
    actor_opt = spied(actor, "actor", recorder.events)
    critic_opt = spied(value, "critic", recorder.events) if critic else None
    metrics = update(batch, actor, value, actor_opt, critic_opt, cfg, CPU, torch.Generator().manual_seed(seed))
    return actor, value, metrics, recorder.events


def test_one_mini_batch_of_two_micro_batches_by_hand(monkeypatch):
    """The accumulated gradient of the actor's loss on token v is -(sum of its advantages) / 5, so w[v] becomes
    (sum of its advantages) / 5: w[1] = 1/5, w[2] = 2/5, w[7] = 3/5, w[6] = -1/5, w[5] = 2/5. The critic's is
    (w[v] - return) / 5 per token: w[1] = w[2] = 1/5, w[7] = w[6] = w[5] = 2/5."""
    actor, critic, _, _ = run(monkeypatch, make_batch(**TWO_ROWS), make_cfg())
    assert torch.allclose(actor.w.detach(), torch.tensor([0, 1, 2, 0, 0, 2, -1, 3]) / 5, atol=1e-6), actor.w
    assert torch.allclose(critic.w.detach(), torch.tensor([0, 1, 1, 0, 0, 2, 2, 2]) / 5, atol=1e-6), critic.w


def test_the_actor_steps_before_the_critic(monkeypatch):
    """Per mini-batch: the actor's micro-batches, its one step; then the critic's micro-batches, its one step."""
    *_, events = run(monkeypatch, make_batch(**TWO_ROWS), make_cfg())
    steps = [e for e in events if e[0] in ("actor loss", "critic loss") or e[1] == "step"]
    order = [e[1] for e in events if e[0] == "actor forward"]  # the update's order of the rows
    assert sorted(map(tuple, order)) == [(0,), (1,)]
    tokens = [2 if rows == [0] else 3 for rows in order]
    assert steps == [("actor loss", tokens[0]), ("actor loss", tokens[1]), ("actor", "step"),
                     ("critic loss", tokens[0]), ("critic loss", tokens[1]), ("critic", "step")]


def test_the_metrics_are_summed_over_micro_batches_and_averaged_over_steps(monkeypatch):
    """train/policy_loss: the step's micro-batch losses summed (at w = 0 the actor's loss is 0); train/value_loss:
    (0.5 x 2 + 0.5 x 12) / 5 = 1.4; train/tokens and train/vf_clipfrac: means over the micro-batches, (2 + 3) / 2
    and (0.2 + 0.3) / 2; train/grad_norm: the actor's gradient norm, sqrt(1 + 4 + 9 + 1 + 4) / 5."""
    _, _, metrics, _ = run(monkeypatch, make_batch(**TWO_ROWS), make_cfg())
    assert metrics["train/policy_loss"] == pytest.approx(0.0, abs=1e-7)
    assert metrics["train/value_loss"] == pytest.approx(1.4)
    assert metrics["train/tokens"] == pytest.approx(2.5) and metrics["train/vf_clipfrac"] == pytest.approx(0.25)
    assert metrics["train/grad_norm"] == pytest.approx(19 ** 0.5 / 5)
    assert metrics["train/critic_grad_norm"] == pytest.approx((1 + 1 + 4 + 4 + 4) ** 0.5 / 5)
    assert "train/explained_variance" in metrics


def test_the_gradient_is_clipped_before_the_step(monkeypatch):
    """One row, tokens 1 and 2 with advantages 6 and 8: the gradient is (-3, -4), norm 5; clipped to norm 1 it
    is (-0.6, -0.8), and w moves to (0.6, 0.8). Without a critic (GRPO) there is no critic step."""
    batch = make_batch([[1, 2, 0, 0, 0, 0, 0]], [[1, 1, 0, 0, 0, 0, 0]], [[6, 8, 0, 0, 0, 0, 0]])
    actor, _, metrics, events = run(monkeypatch, batch, make_cfg(mini=1, grad_clip=1.0), critic=False)
    assert torch.allclose(actor.w.detach()[1:3], torch.tensor([0.6, 0.8]), atol=1e-5), actor.w
    assert metrics["train/grad_norm"] == pytest.approx(5.0)  # the norm before clipping
    assert not [e for e in events if e[0].startswith("critic")] and "train/value_loss" not in metrics


def test_a_non_finite_gradient_skips_the_step_and_the_gradients_are_freed(monkeypatch):
    advantages = [[1, float("nan"), 0, 0, 0, 0, 0], [3, -1, 2, 0, 0, 0, 0]]
    batch = make_batch(TWO_ROWS["tokens"], TWO_ROWS["mask"], advantages, TWO_ROWS["returns"])
    with pytest.warns(UserWarning, match="non-finite actor gradient norm"):
        actor, critic, metrics, _ = run(monkeypatch, batch, make_cfg())
    assert (actor.w.detach() == 0).all() and metrics["train/actor_skipped_updates"] == 1
    assert critic.w.detach()[7] == pytest.approx(0.4)  # the critic's step is not skipped
    assert actor.w.grad is None and critic.w.grad is None


def test_agrees_with_stored_weights_over_epochs(monkeypatch):
    """Six rows, two epochs of mini-batches of 4 (then 2) rows in micro-batches of at most 3, gradients clipped to
    norm 0.5, SGD at learning rate 1: the mini-batches' rows are torch.randperm's order of a generator seeded
    3, and the weights after the update were made once by plain loops (course/hidden/make_fixtures.py) and
    stored in fixtures/ex12-update.json."""
    case = adapters.fixture("ex12-update")["two_epochs"]
    batch = make_batch(case["tokens"], case["mask"], case["advantages"], case["returns"])
    cfg = make_cfg(mini=4, micro=3, epochs=2, grad_clip=0.5)
    actor, critic, _, events = run(monkeypatch, batch, cfg, seed=3)
    assert [rows for name, rows in events if name == "actor forward"] == case["actor_micro_batches"]
    assert torch.allclose(actor.w.detach(), torch.tensor(case["actor"]), atol=1e-5), actor.w
    assert torch.allclose(critic.w.detach(), torch.tensor(case["critic"]), atol=1e-5), critic.w
