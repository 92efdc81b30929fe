"""The reasoning warm-up (the model's own thoughts inside <think>) and the reasoning-collapse measures
(distinct thoughts across seeds, the placeholder share, I(X;R) from the model's log-probs), each against a
hand-worked example or an independent computation. SmolLM2's tokenizer is checked in tests/test_smollm2.py."""
import doctest
import math
import random
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import bookkeeping  # noqa: E402
import config  # noqa: E402
import launch  # noqa: E402
import models  # noqa: E402
import ragen_mini  # noqa: E402
import rollout  # noqa: E402
import starpo  # noqa: E402
from envs import make_env  # noqa: E402
from rollout import Trajectory, Turn  # noqa: E402

CPU = torch.device("cpu")
SMALL = ["model.name=tiny", "train.device=cpu", "rollout.groups=3", "rollout.group_size=2", "rollout.max_new_tokens=40",
         "rollout.max_context=1024", "env.name=sokoban", "env.max_turns=2", "algo.mini_batch_size=2",
         "algo.micro_batch_size=2", "warmup.steps=2", "warmup.batch_size=3", "warmup.thoughts=own",
         "warmup.thought_tokens=8", "checkpoint.every=0"]


def ns(*overrides):
    return config.namespace(config.load_config(str(ROOT / "configs" / "tiny.yaml"), [*SMALL, *overrides]))


@pytest.fixture(scope="module")
def tok_actor():
    torch.manual_seed(0)
    tokenizer, actor = models.load_models(ns(), CPU)
    return tokenizer, actor.eval()


def encode(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


# ---- the thought prompt and the thought's text ----------------------------------------------------------------
def test_the_thought_prompt_drops_the_format_lines_and_asks_once_at_the_end():
    cfg = ns()
    line = rollout.format_line(cfg)
    context = (f"<|im_start|>user\nTurn 1:\nState:\n#P#\nYou have 10 actions left. {line}\n<|im_end|>\n"
               f"<|im_start|>assistant\n<think> go </think><answer>Up</answer><|im_end|>\n<|im_start|>user\n"
               f"Reward:\n-0.1\n\nTurn 2:\nState:\n#_P\nYou have 9 actions left. {line}\n<|im_end|>\n"
               f"<|im_start|>assistant\n<think>")
    expected = ("<|im_start|>user\nTurn 1:\nState:\n#P#\nYou have 10 actions left.\n<|im_end|>\n"
                "<|im_start|>assistant\n<think> go </think><answer>Up</answer><|im_end|>\n<|im_start|>user\n"
                "Reward:\n-0.1\n\nTurn 2:\nState:\n#_P\nYou have 9 actions left. Think about the state and what to do next."
                "\n<|im_end|>\n<|im_start|>assistant\n")
    assert rollout.thought_prompt(context, cfg) == expected


@pytest.mark.parametrize("text, thought", [
    (" The box is left of me. I push it<answer>Up", "The box is left of me."),
    ("<think> Move up, then right!\n######", "Move up, then right!"),
    ("Go up and see what is there", "Go up and see what is there"),  # no full sentence: kept as written
    ("\n###P#\nGo", "###P#"),  # the first line that holds anything (the teacher asks again: under five words)
    ("Which way? Up. Then", "Which way? Up."),
])
def test_clean_thought(text, thought):
    assert rollout.clean_thought(text) == thought


def test_thought_length_stops_at_the_first_token_holding_a_tag(tok_actor):
    tok, _ = tok_actor
    thought, rest = encode(tok, " go up"), encode(tok, " </think><answer>Up</answer>")
    assert rollout.thought_length(thought + rest, tok) == len(thought)
    assert rollout.thought_length(thought, tok) == len(thought)  # a reply that never closes: all thought
    unknown = [len(tok) + 5]  # an embedding row past the tokenizer's vocabulary, as --bench's model samples
    # it holds no "<" and decodes to nothing: a blank before the tag
    assert rollout.thought_length(thought + unknown + rest, tok) == len(thought)


# ---- the teacher: the model's own thoughts, then a random answer ----------------------------------------------
def test_own_thoughts_come_from_the_model_under_the_thought_prompt(tok_actor, monkeypatch):
    """The teacher asks the model (the one passed in) with the thought prompt, never with the format line; each
    reply is " thought </think><answer>a</answer><|im_end|>" with the model's cleaned text as the thought and a
    valid action; too short thoughts are asked for again, and only those."""
    tok, actor = tok_actor
    cfg = ns("rollout.max_new_tokens=40", "warmup.thought_tokens=30", "warmup.steps=4")  # longer than any thought
    chat = rollout.chat_format(tok)
    asked = []
    scripted = iter(["Box is up so I go left", "no", "Wall on the right side so down", "x y", "You have 10 actions left",
                     "The target is near me now"])

    class FakeLLM:  # stands in for rollout.LLMPolicy: records who is asked what, answers with scripted text
        def __init__(self, rollout_model, cfg_, temperature):
            assert rollout_model.model is actor and temperature == cfg.warmup.thought_temperature
            assert cfg_.rollout.max_new_tokens == cfg.warmup.thought_tokens

        def __call__(self, contexts):
            asked.append([tok.decode(c) for c in contexts])
            return [encode(tok, next(scripted)) for _ in contexts]

    monkeypatch.setattr(rollout, "LLMPolicy", FakeLLM)
    teacher = rollout.own_thoughts_policy(rollout.RolloutModel(actor, chat), cfg, random.Random(0))
    contexts = [encode(tok, rollout.first_prompt(env, env.reset(seed)[0], tok, cfg))
                for seed, env in ((s, make_env("sokoban")) for s in (1, 2, 3))]
    replies = teacher(contexts)
    # "no", then "x y", asked again (under five words), then "You have 10 actions left" (the prompt's own words)
    assert [len(call) for call in asked] == [3, 1, 1, 1]
    for call in asked:
        for text in call:
            assert rollout.format_line(cfg) not in text and text.endswith(
                "Think about the state and what to do next.\n<|im_end|>\n<|im_start|>assistant\n")
    thoughts = ["Box is up so I go left", "The target is near me now", "Wall on the right side so down"]
    for reply, thought in zip(replies, thoughts):
        text = tok.decode(reply)
        head, answer = text.split(" </think><answer>")
        assert head == " " + thought
        actions = answer.removesuffix("</answer><|im_end|>").split(" || ")  # 1 to max_actions_per_turn (5) actions
        assert 1 <= len(actions) <= 5 and set(actions) <= {"Up", "Down", "Left", "Right"}
        assert reply[-1] == chat.end_of_turn_id


@pytest.mark.slow
def test_the_warmup_trains_on_thoughts_and_format_or_on_the_format_alone(tok_actor, monkeypatch):
    """warmup.thought_loss: the loss covers each reply whole, or only from its closing tag on."""
    tok, actor = tok_actor
    masks = []
    real_logprobs = ragen_mini.token_logprobs
    monkeypatch.setattr(ragen_mini, "token_logprobs", lambda m, ids, mask, *a, **k: masks.append((ids, mask.clone()))
                        or real_logprobs(m, ids, mask, *a, **k))
    for thought_loss in (True, False):
        masks.clear()
        cfg = ns(f"warmup.thought_loss={str(thought_loss).lower()}")
        warmed = __import__("copy").deepcopy(actor)
        launch.format_warmup(warmed, rollout.RolloutModel(warmed, rollout.chat_format(tok)), cfg, CPU)
        assert len(masks) >= 2
        trained = "".join(tok.decode([t for t, m in zip(ids[0, 1:].tolist(), mask[0].tolist()) if m]) for ids, mask in masks)
        assert "</think><answer>" in trained and "<|im_end|>" in trained
        if thought_loss:  # the thoughts are trained too: text before each closing tag
            assert any(len(piece.strip()) > 0 for piece in trained.split("</think>")[:-1])
        else:  # only " </think><answer>X</answer><|im_end|>" pieces
            for piece in trained.split("<|im_end|>")[:-1]:
                assert piece.strip().startswith("</think><answer>") and piece.endswith("</answer>")


def test_without_thoughts_keeps_the_closing_tag_and_the_answer(tok_actor):
    tok, _ = tok_actor
    prompt, env = encode(tok, "<|im_start|>user\nState:\n#P#<|im_end|>\n<|im_start|>assistant\n<think>"), encode(tok, "\nReward")
    reply1 = encode(tok, " the box is up") + encode(tok, " </think><answer>Up</answer>") + [2]
    reply2 = encode(tok, " left") + encode(tok, " </think><answer>Left</answer>") + [2]
    ids = prompt + reply1 + env + reply2
    sampled = [0] * len(prompt) + [1] * len(reply1) + [0] * len(env) + [1] * len(reply2)
    kept = rollout.without_thoughts(ids, sampled, tok)
    assert tok.decode([i for i, k in zip(ids, kept) if k]) == (" </think><answer>Up</answer>" + tok.decode([2])
                                                                 + " </think><answer>Left</answer>" + tok.decode([2]))


# ---- the collapse measures ----------------------------------------------------------------------------------
def test_thought_mutual_information_against_a_hand_computation():
    rows = [[-1.0, -4.0, -2.0], [-3.0, -1.0, -2.0], [-5.0, -6.0, -2.0]]  # log p(thought j | prompt i)
    by_hand = 0.0  # plain floats: the reference shares no code, and no tensor type, with the function
    for j in range(3):
        marginal = sum(math.exp(rows[i][j]) for i in range(3)) / 3
        by_hand += (rows[j][j] - math.log(marginal)) / 3
    assert float(starpo.thought_mutual_information(torch.tensor(rows))) == pytest.approx(by_hand, abs=1e-6)
    assert float(starpo.thought_mutual_information(torch.zeros(4, 4))) == pytest.approx(0.0, abs=1e-7)  # one template
    diagonal = torch.full((4, 4), -1e4).fill_diagonal_(0.0)
    assert float(starpo.thought_mutual_information(diagonal)) == pytest.approx(math.log(4))  # each fits its own prompt
    # several thoughts per prompt: thought k was sampled for prompt own[k]
    rows, own = [[-1.0, -2.5, -4.0, -0.5, -3.0], [-2.0, -1.0, -1.5, -6.0, -2.0]], [0, 0, 1, 1, 1]
    by_hand = sum(rows[own[k]][k] - math.log((math.exp(rows[0][k]) + math.exp(rows[1][k])) / 2)
                  for k in range(5)) / 5
    got = float(starpo.thought_mutual_information(torch.tensor(rows), torch.tensor(own)))
    assert got == pytest.approx(by_hand, abs=1e-6)


def test_thought_metrics_on_hand_built_trajectories():
    def traj(seed, *thinks):
        return Trajectory(seed=seed, group=seed, turns=[Turn(think=t, actions=[], format_ok=True, reward=0.0,
                                                             think_tokens=len(t.split())) for t in thinks])
    trajectories = [traj(1, "go up", "a b c d"), traj(1, "other"), traj(2, "go up"), traj(3, "[Your thoughts]", "x")]
    metrics = bookkeeping.rollout_metrics(trajectories, "rollout")
    assert metrics["rollout/distinct_thoughts"] == pytest.approx(2 / 3)  # seeds 1, 2, 3: "go up" twice, one placeholder
    assert metrics["rollout/placeholder_thoughts"] == pytest.approx(1 / 6)
    assert metrics["rollout/think_tokens_median"] == 2.0  # [2, 4, 1, 2, 2, 1]


def test_the_trainers_mi_scores_each_thought_under_every_prompt(tok_actor):
    """ragen_mini.measure_thought_mi against each (prompt, thought) pair scored alone, unpadded, by the trainer's
    token_logprobs (course exercise ex10, graded by its own tests), and I by hand in plain floats, on
    hand-placed thoughts: the first mi_samples = 2 trajectories of the first mi_groups = 2 groups count."""
    tok, actor = tok_actor
    cfg = ns("rollout.mi_groups=2", "rollout.mi_samples=2")
    chat = rollout.chat_format(tok)
    words = [" go up", " the box is left of me", " push it right", " wall", " up up", " I see a target"]
    answer = encode(tok, " </think><answer>Up</answer>") + [chat.end_of_turn_id]
    trajectories, prompts, counted = [], [], []  # counted: (group, thought ids) of the thoughts that count
    for group, seed in enumerate((5, 6, 7)):
        env = make_env("sokoban")
        prompt = encode(tok, rollout.first_prompt(env, env.reset(seed)[0], tok, cfg))
        prompts.append(prompt)
        for sample in range(3):  # three trajectories a group, each with a thought of its own
            thought = encode(tok, words[(2 * group + sample) % len(words)])
            trajectories.append(Trajectory(seed=seed, group=group, ids=prompt + thought + answer,
                                           sampled=[0] * len(prompt) + [1] * (len(thought) + len(answer))))
            if group < 2 and sample < 2:
                counted.append((group, thought))
    logp = [[0.0] * len(counted) for _ in range(2)]  # log p(thought k | prompt i), each pair alone
    with torch.no_grad():
        for i in range(2):
            for k, (_, thought) in enumerate(counted):
                mask = torch.tensor([[0.0] * (len(prompts[i]) - 1) + [1.0] * len(thought)])
                pair = torch.tensor([prompts[i] + thought])
                logp[i][k] = float(ragen_mini.token_logprobs(actor, pair, mask, cfg)[0].sum())
    expected = sum(logp[g][k] - math.log((math.exp(logp[0][k]) + math.exp(logp[1][k])) / 2)
                   for k, (g, _) in enumerate(counted)) / len(counted)
    got = ragen_mini.measure_thought_mi(actor, chat, trajectories, cfg, CPU)["rollout/thought_mi"]
    # each thought credited to the other prompt gives another number: the test can tell them apart
    swapped = sum(logp[1 - g][k] - math.log((math.exp(logp[0][k]) + math.exp(logp[1][k])) / 2)
                  for k, (g, _) in enumerate(counted)) / len(counted)
    assert got == pytest.approx(expected, rel=1e-3, abs=1e-7) and abs(expected - swapped) > 1e-5
    assert ragen_mini.measure_thought_mi(actor, chat, trajectories[:3], cfg, CPU) == {}  # one group: nothing to compare


def test_the_docstring_examples_of_the_rollout_hold():
    result = doctest.testmod(rollout)
    assert result.attempted >= 3 and result.failed == 0
