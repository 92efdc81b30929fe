"""The paper's code's own choices as switches (docs/paper.md §9, configs/ragen-paper.yaml), each checked
against a computation written here (a plain loop over micro-batches, the k1 estimator by hand) or against stored
numbers, tests/fixtures/paper_mode.json: the pinned verl's GAE loop and RAGEN's regular expression with its
deletions, made once by references that stay out of the student copy (course/hidden/make_fixtures.py), since GAE
and the parser are exercises."""
import copy
import json
import random
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import models  # noqa: E402
import ragen_mini  # noqa: E402
import rollout  # noqa: E402
import starpo  # noqa: E402
from config import load_config, namespace  # noqa: E402
from envs import parse_answer, without_special_strings  # noqa: E402
from test_trainer import CPU, chat_of, ns, tok_actor  # noqa: E402,F401

MOVES = ["Up", "Down", "Left", "Right"]
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "paper_mode.json").read_text())


def test_the_paper_preset_turns_every_switch_to_the_paper_s_side():
    cfg = namespace(load_config(str(ROOT / "configs" / "ragen-paper.yaml"), []))
    ours = namespace(load_config(None, []))
    switches = lambda c: (c.algo.train_tokens, c.rollout.clean_history, c.algo.loss_agg, c.algo.grpo_kl,
                          c.algo.gae_skip_observations, c.rollout.delete_special_strings)  # §9.1 to §9.6
    assert switches(cfg) == ("after_system", True, "micro-batch-mean", "k1", False, True)
    assert switches(ours) == ("sampled", False, "token-mean", "k3", True, False)


# ---- §9.3: the loss's average over micro-batches ------------------------------------------------------
@pytest.mark.parametrize("loss_agg", ["token-mean", "micro-batch-mean"])
def test_loss_aggregation_matches_a_plain_loop_over_micro_batches(tok_actor, loss_agg):
    """One GRPO step over 6 trajectories in micro-batches of 4 and 2 with different token counts. Before
    the step the ratio is 1, so a token's loss is -A: the logged loss is sum(-A) / all tokens (ours), or
    the mean over micro-batches of each one's sum(-A) / its tokens (the paper's code).
    Rows 0..5 have 4, 6, 9, 5, 19, 8 response tokens and advantages 1, -1, 2, 0.5, -2, 1; the update's order
    (seed 7) is 3, 0, 1, 5 | 2, 4. Micro-batch 1: -(0.5 x 5 + 4 - 6 + 8) = -8.5 over 23 tokens; micro-batch
    2: -(18 - 38) = 20 over 28. Ours: 11.5 / 51; the paper's: (-8.5 / 23 + 20 / 28) / 2."""
    tok, actor = tok_actor
    cfg = ns("algo.estimator=grpo", "model.critic=false", "rollout.groups=2", "rollout.group_size=3",
             "algo.filter_ratio=1.0", "algo.mini_batch_size=6", "algo.micro_batch_size=4",
             "algo.entropy_coef=0.0", f"algo.loss_agg={loss_agg}")
    g = torch.Generator().manual_seed(3)
    lengths = [9, 14, 20, 11, 40, 17]  # 23 and 28 sampled tokens in the two micro-batches
    trajectories = []
    for i, n in enumerate(lengths):
        ids = torch.randint(3, len(tok), (n,), generator=g).tolist()
        sampled = [0] * (n // 2) + [1] * (n - n // 2 - 1) + [0]
        trajectories.append(rollout.Trajectory(seed=i, group=i // 3, ids=ids, sampled=sampled, reward=float(i % 2)))
    batch = ragen_mini.collate(trajectories, 0, CPU)
    ragen_mini.old_logprobs_and_values(batch, actor, None, None, cfg, CPU)
    assert batch.loss_mask.sum(-1).tolist() == [4, 6, 9, 5, 19, 8]
    batch.advantages = torch.tensor([1, -1, 2, 0.5, -2, 1])[:, None] * batch.loss_mask
    ours, paper = 11.5 / 51, (-8.5 / 23 + 20 / 28) / 2  # 0.2255 and 0.1724: the two averages differ
    model = copy.deepcopy(actor)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0)
    metrics = ragen_mini.update(batch, model, None, optimizer, None, cfg, CPU, torch.Generator().manual_seed(7))
    expected = ours if loss_agg == "token-mean" else paper
    assert metrics["train/policy_loss"] == pytest.approx(expected, rel=1e-4, abs=1e-6)


# ---- §9.4: GRPO's KL estimator in the loss ------------------------------------------------------------
def test_grpo_kl_k1_is_the_mean_log_ratio_to_the_reference():
    algo = type("Algo", (), dict(clip_low=0.2, clip_high=0.28, dual_clip=0, entropy_coef=0.0, kl_coef=0.5,
                                 estimator="grpo", grpo_kl="k1"))
    logp = torch.tensor([[-1.0, -2.0, -0.5]])
    ref = torch.tensor([[-1.5, -1.0, -0.5]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    advantages = torch.tensor([[1.0, -2.0, 0.0]])
    loss, _ = starpo.actor_loss(logp, torch.zeros_like(logp), logp, advantages, mask, algo, loss_normalizer=None,
                                   ref_logp=ref)
    # ratio 1: policy term mean(-A) = (-1 + 2) / 2; k1 = logp - ref: (0.5, -1.0), mean -0.25, times 0.5
    assert loss.item() == pytest.approx(0.5 + 0.5 * -0.25)
    algo.grpo_kl = "k3"  # exp(x) - x - 1 with x = ref - logp: (exp(-.5) + .5 - 1, exp(1) - 1 - 1)
    k3 = ((torch.exp(torch.tensor(-0.5)) - 0.5) + (torch.exp(torch.tensor(1.0)) - 2)) / 2
    loss3, _ = starpo.actor_loss(logp, torch.zeros_like(logp), logp, advantages, mask, algo, loss_normalizer=None,
                                   ref_logp=ref)
    assert loss3.item() == pytest.approx(0.5 + 0.5 * k3.item())


# ---- §9.5: GAE through the env's tokens -------------------------------------------------------------
@pytest.mark.parametrize("case", FIXTURE["gae"]["cases"], ids=lambda c: f"gamma={c['gamma']},lam={c['lam']}")
def test_gae_through_observation_tokens_matches_the_pinned_verl_loop(case):
    """compute_gae over gae_steps(mask) is the pinned verl's loop: every position from a row's first sampled token
    to its last is a step, the env's tokens included (stored advantages and returns, 0 outside)."""
    stored = FIXTURE["gae"]
    mask, values, rewards = (torch.tensor(stored[k], dtype=torch.float64) for k in ("mask", "values", "rewards"))
    gamma, lam = case["gamma"], case["lam"]
    adv, ret = starpo.compute_gae(rewards, values, starpo.gae_steps(mask), gamma, lam)
    torch.testing.assert_close(adv, torch.tensor(case["advantages"], dtype=torch.float64), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ret, torch.tensor(case["returns"], dtype=torch.float64), rtol=1e-6, atol=1e-6)
    skipping, _ = starpo.compute_gae(rewards, values, mask, gamma, lam)
    same = torch.allclose(skipping * mask, adv * mask, atol=1e-5)
    assert same == (gamma == 1.0 and lam == 1.0)  # identical only at gamma = lam = 1 (docs/paper.md §9.5)


def test_compute_advantages_steps_through_observations_when_asked():
    """The trainer's step 4 with algo.gae_skip_observations=false: the verl loop (stored), then whitened over the
    sampled tokens (by hand here); the critic's targets stay on the sampled tokens."""
    cfg = ns("algo.gae_skip_observations=false", "algo.gamma=0.9", "algo.lam=0.8")
    mask = torch.tensor([[0, 1, 1, 0, 0, 1, 0]], dtype=torch.float)
    stored = FIXTURE["trainer_row"]
    values = torch.tensor([stored["values"]])
    batch = ragen_mini.Batch(input_ids=None, attention_mask=None, loss_mask=mask, rewards=torch.tensor([1.0]),
                             group_ids=torch.tensor([0]), values=values)
    ragen_mini.compute_advantages(batch, cfg)
    raw = stored["advantages"]  # reward 1 on position 5, steps 1..5
    picked = torch.tensor([raw[1], raw[2], raw[5]], dtype=torch.float64)
    whitened = (picked - picked.mean()) / torch.sqrt(picked.var(unbiased=True) + 1e-8)  # verl: Bessel variance
    assert batch.advantages[0, [1, 2, 5]].tolist() == pytest.approx(whitened.tolist(), abs=1e-5)
    assert batch.returns[0, [0, 3, 4, 6]].tolist() == [0.0] * 4


# ---- §9.6: the parser deletes special strings -------------------------------------------------------
def test_deleting_special_strings_matches_ragen_s_parser():
    """Varied replies read as RAGEN's parser reads them (stored): its regular expression, then the special strings
    (<think>, </think>, <answer>, </answer>, <|im_start|>, <|im_end|>) deleted inside the answer."""
    cases = FIXTURE["paper_parser"]
    differ = 0
    for text, require_think, max_actions, actions, format_ok in cases:
        got = parse_answer(without_special_strings(text, require_think), MOVES, max_actions, require_think)
        assert (got.actions, got.format_ok) == (actions, format_ok), repr(text)
        differ += (parse_answer(text, MOVES, max_actions, require_think).format_ok != format_ok)
    assert differ == FIXTURE["plain_parser_differs"] > 50  # the switch matters on these replies


@pytest.mark.parametrize("delete", [False, True])
def test_the_rollout_uses_the_paper_s_parser_when_asked(tok_actor, delete):
    """A nested answer tag plays Up with the switch on and earns the format penalty without it."""
    tok, _ = tok_actor
    cfg = ns("env.name=sokoban", "env.max_turns=1", f"rollout.delete_special_strings={delete}")
    chat = chat_of(tok)
    answer = tok("</think><answer><answer>Up</answer></answer>", add_special_tokens=False)["input_ids"]
    trajectory = rollout.play_episodes(lambda contexts: [answer + [chat.end_of_turn_id]] * len(contexts), chat, cfg,
                                       [4], [4])[0]
    assert trajectory.turns[0].format_ok == delete
    assert trajectory.turns[0].actions == (["Up"] if delete else [])


# ---- §9.1: the trained tokens -------------------------------------------------------------------------
def test_after_system_trains_every_token_after_the_user_turn_s_first_token(tok_actor):
    """RAGEN's mask: positions from the second turn start (<|im_start|> of the first user message) on
    predict trained tokens; here found by searching the ids for <|im_start|>."""
    tok, _ = tok_actor
    cfg = ns("env.name=sokoban", "env.max_turns=2")
    chat = chat_of(tok)
    trajectories = rollout.play_episodes(rollout.random_policy(chat, cfg, random.Random(0)), chat, cfg, [1, 2], [1, 2])
    batch = ragen_mini.collate(trajectories, chat.pad_id, CPU, train_from=chat.system_length + 1)
    im_start = tok.convert_tokens_to_ids("<|im_start|>")
    for row, t in enumerate(trajectories):
        second_start = [i for i, x in enumerate(t.ids) if x == im_start][1]
        expected = [1.0 if second_start <= i < len(t.ids) - 1 else 0.0 for i in range(batch.loss_mask.shape[1])]
        assert batch.loss_mask[row].tolist() == expected
        assert tok.decode(t.ids[:second_start]) == tok.apply_chat_template(
            [{"role": "system", "content": rollout.SYSTEM_PROMPT}], tokenize=False)
    assert batch.loss_mask.sum() > 5 * sum(sum(t.sampled) for t in trajectories)  # far more than the replies


@pytest.mark.slow
def test_the_trainer_passes_the_after_system_start_to_collate(tmp_path, monkeypatch):
    seen = []
    collate = ragen_mini.collate
    monkeypatch.setattr(ragen_mini, "collate", lambda *args: seen.append(args[3:]) or collate(*args))
    cfg = load_config(str(ROOT / "configs" / "tiny.yaml"),
                      ["train.device=cpu", "rollout.groups=2", "rollout.group_size=2", "env.max_turns=1",
                       "rollout.max_new_tokens=4", "algo.mini_batch_size=2", "algo.micro_batch_size=2",
                       "warmup.steps=0", "eval.every=0", "checkpoint.every=0", "train.iterations=1",
                       "algo.train_tokens=after_system", "rollout.mi_groups=0", f"run_dir={tmp_path / 'run'}"])
    ragen_mini.train(cfg)
    tok, actor = models.load_models(namespace(cfg), CPU)
    assert seen == [(rollout.chat_format(tok, actor.generation_config).system_length + 1,)]


# ---- §9.2: the history keeps the cleaned reply ------------------------------------------------------------
@pytest.mark.parametrize("clean", [False, True])
def test_clean_history_keeps_the_parsed_reply_in_the_context_and_for_training(tok_actor, clean):
    tok, _ = tok_actor
    cfg = ns("env.name=sokoban", "env.max_turns=2", f"rollout.clean_history={clean}")
    chat = chat_of(tok)
    reply = " go <answer> </think>  <answer>Up||Up||Up|| ||Up||Up||Left</answer> bye"  # 6 pieces, 5 kept
    reply_ids = tok(reply, add_special_tokens=False)["input_ids"] + [chat.end_of_turn_id]
    shown = []

    def policy(contexts):
        shown.append([list(c) for c in contexts])
        return [reply_ids] * len(contexts)

    t = rollout.play_episodes(policy, chat, cfg, [3], [3])[0]
    assert len(t.turns) == 2
    first_reply = t.ids[t.sampled.index(1):][:t.sampled[t.sampled.index(1):].index(0)]  # the first sampled stretch
    # the paper's code: think and answer stripped, tags inside deleted, answer cut to 5 pieces and joined
    expected = "go</think><answer>Up || Up || Up || Up || Up</answer><|im_end|>" if clean else reply + "<|im_end|>"
    assert tok.decode(first_reply) == expected
    assert tok.decode(shown[1][0]).count(expected) == 1  # the next turn's context holds that same text
    assert t.response_tokens == 2 * len(reply_ids)  # what the model sampled, either way
