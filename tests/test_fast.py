"""The fast engine (fast/, rollout.engine) computes what the readable path computes.

The static decoder (fast/decoder.py) keeps a conversation's KV cache from turn to turn: whole multi-turn
rollouts with greedy answers must come out token for token as transformers' `generate` plays them, turn after
turn re-reading the whole conversation, while the recorded forward passes show that later turns fed only their
new tokens, and that the cache is compacted when that shrinks a turn's window or makes it fit. The decoder's
own forward must give the logits of the model's forward for every Llama and Qwen2 configuration it accepts,
compiled for the prefills as one graph for all layers, and its decoding step compiled twice at most for all
windows; its sampler must draw tokens with their softmax probabilities.

The compiled layers and log-softmax (fast/compile.py) and the packed GAE (fast/gae.py) must give the readable
functions' numbers. rollout.engine is the one switch, read once when a run is built (models.choose_engine): the
readable path never imports fast/, and models.py alone imports the package.
"""
import copy
import doctest
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import config  # noqa: E402
import fast  # noqa: E402
import fast.compile  # noqa: E402
import fast.decoder  # noqa: E402
import fast.gae  # noqa: E402
import launch  # noqa: E402
import models  # noqa: E402
import ragen_mini  # noqa: E402
import rollout  # noqa: E402
import starpo  # noqa: E402
from test_starpo import check_gae_against_stored, gae_cases, multi_turn_mask  # noqa: E402
from test_trainer import BANDIT, CPU, TINY_YAML, chat_of, ns, sharpened, tok_actor  # noqa: E402,F401
from test_trainer import SMALL as SMALL_RUN  # noqa: E402
from helpers import two_at_once  # noqa: E402


def prefills(monkeypatch):
    """Records (first slot, width, window) of every fast.decoder.forward that feeds more than one token per
    row."""
    seen, real = [], fast.decoder.forward

    def recording(model, fused, keys, values, ids, positions, slots, visible, *args, **kwargs):
        if ids.shape[1] > 1:
            seen.append((int(slots[0]), ids.shape[1], visible.shape[-1]))
        return real(model, fused, keys, values, ids, positions, slots, visible, *args, **kwargs)

    monkeypatch.setattr(fast.decoder, "forward", recording)
    return seen


def graph_counter():
    """A torch.compile backend that runs each graph it is given as traced (no code generation) and keeps it in
    `graphs`: how many times the code was compiled. -> (graphs, backend)"""
    graphs = []

    def counting_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward
    return graphs, counting_backend


def replies_of(trajectory):
    """The sampled stretches of a trajectory, one per turn."""
    replies, current = [], []
    for token, sampled in zip(trajectory.ids, trajectory.sampled):
        if sampled:
            current.append(token)
        elif current:
            replies, current = replies + [current], []
    return replies + ([current] if current else [])


def llama_like(actor):
    """A random-init Llama model of the tiny model's size: no biases in q, k, v, another RoPE base
    (SmolLM2's)."""
    c = actor.config
    torch.manual_seed(1)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, rope_theta=100000.0, tie_word_embeddings=True)).eval()


@pytest.fixture(scope="module")
def played_by_generate():
    """{(family, max_context): the rollouts transformers' generate plays}, filled as the cases below run: two of
    them differ only in the decoder's windows, which generate does not have, and share theirs."""
    return {}


@pytest.mark.parametrize("family, max_context, window_step",
                         [("qwen2", 1024, 256), ("qwen2", 785, 256), ("llama", 785, 256), ("qwen2", 785, 1)])
@pytest.mark.slow
def test_multi_turn_rollouts_equal_generate_and_later_turns_feed_only_new_tokens(tok_actor, family, max_context,
                                                                                  window_step, monkeypatch,
                                                                                  played_by_generate):
    """Sokoban, 5 turns of up to 12 tokens, 10 trajectories in a decoder of 12 rows (2 spare). Some
    replies stop early (their padding slots must be masked), and with max_context=785 trajectories end at
    different turns (the live rows become a subsequence): the conversations reach 770-807 tokens. With
    windows of one slot (window_step=1) every turn after one with padding shrinks its window by compacting
    the cache, and the slots (max_context + 1) run out but for compaction. The decoder runs the layers
    itself (fast.decoder.forward), for Qwen2 and Llama models."""
    monkeypatch.setattr(fast.decoder, "WINDOW_STEP", window_step)
    tok, actor = tok_actor
    cfg = ns("env.name=sokoban", "env.max_turns=5", "rollout.max_new_tokens=12",
             f"rollout.max_context={max_context}")
    model = sharpened(actor if family == "qwen2" else llama_like(actor), tok, eos_boost=1.0)
    chat = chat_of(tok)
    seeds = list(range(10))
    if (family, max_context) not in played_by_generate:
        plain = rollout.LLMPolicy(rollout.RolloutModel(model, chat), cfg, 0.0)
        played_by_generate[family, max_context] = rollout.play_episodes(plain, chat, cfg, seeds, seeds)
    expected = played_by_generate[family, max_context]
    decoder = fast.decoder.StaticDecoder(model, 12, cfg, chat.stop_ids, chat.pad_id)
    seen = prefills(monkeypatch)
    got = rollout.play_episodes(rollout.LLMPolicy(rollout.RolloutModel(model, chat, decoder), cfg, 0.0), chat, cfg,
                                seeds, seeds)
    assert [t.ids for t in got] == [t.ids for t in expected]
    assert [t.sampled for t in got] == [t.sampled for t in expected]
    turns = [len(t.turns) for t in expected]
    replies = [len(r) for t in expected for r in replies_of(t)]
    assert min(replies) < 12 and max(replies) == 12  # some replies stopped early, some ran to the limit
    # the first turn feeds the whole prompts from slot 0; a continuing turn feeds a block after the used
    # slots, only as wide as the longest new part (env reply + the last reply token not yet fed), rounded
    # up; with windows of 256 slots (WINDOW_STEP slots beyond max_context), every later turn continues
    assert seen[0][0] == 0 and len(seen) == max(turns)
    first_prompt = min(t.sampled.index(1) for t in expected)
    continued = [width for start, width, _ in seen[1:] if start > 0]
    assert continued and all(width < first_prompt for width in continued)
    assert len(continued) == len(seen) - 1 or window_step == 1
    if max_context == 1024:
        assert turns == [5] * 10
    else:
        assert len(set(turns)) > 1  # trajectories ended at different turns
    # compacted: a turn's block starts before the end of the previous turn's block (its reply came after it)
    compacted = any(start < before + width for (before, width, _), (start, _, _) in zip(seen[1:], seen[2:]))
    assert compacted == (window_step == 1)
    # few distinct shapes: widths in steps of 32 tokens (or all the slots a reply leaves), windows of
    # WINDOW_STEP slots (or all the slots), each window holding its block
    slots = max_context + window_step
    assert all(width % 32 == 0 or width == slots - 12 for _, width, _ in seen)
    assert all((window % window_step == 0 or window == slots) and window >= start + width
               for start, width, window in seen)


def test_an_ended_conversation_frees_its_slots_for_the_next_turn(monkeypatch):
    """Three conversations of 20, 6 and 6 tokens; the longest ends after the first turn. Its slots and the
    first turn's padding must be freed (compact) so that the second turn continues the other two in the
    slots left (max_context + WINDOW_STEP = 48), where without compaction they would not fit and the
    cache would start afresh. A fresh decoder, which feeds the two whole conversations, samples the same
    greedy replies (float32)."""
    monkeypatch.setattr(fast.decoder, "WINDOW_STEP", 8)
    model = small_model(*ACCEPTED["qwen2 q/k/v biases"])
    cfg = ns("rollout.max_context=40", "rollout.max_new_tokens=4")
    generator = torch.Generator().manual_seed(2)
    first = [torch.randint(1, 97, (n,), generator=generator).tolist() for n in (20, 6, 6)]
    decoder = fast.decoder.StaticDecoder(model, 3, cfg, [0], 0)
    replies = decoder.generate(first, 0.0).tolist()
    end = decoder.next_slot
    second = [context + [t for t in reply if t != 0] + torch.randint(1, 97, (5,), generator=generator).tolist()
              for context, reply in zip(first[1:], replies[1:])]
    seen = prefills(monkeypatch)
    got = decoder.generate(second, 0.0, reuse=True)
    [(start, width, _)] = seen
    assert end + width + 4 > decoder.slots  # the used slots alone leave no room for this turn
    assert 0 < start < end                  # it continued the cache, compacted
    fresh = fast.decoder.StaticDecoder(model, 3, cfg, [0], 0)
    assert got.tolist() == fresh.generate(second, 0.0).tolist()


def test_min_new_tokens_holds_in_every_turn_of_a_kept_cache(tok_actor):
    """rollout.min_new_tokens bars the stop tokens from the first tokens of every turn, the later turns of
    conversations kept in the cache included: a model whose favourite token is the stop token writes exactly
    min_new_tokens tokens, then the stop token, turn after turn (sampled, T = 1)."""
    tok, actor = tok_actor
    cfg = ns("env.name=sokoban", "env.max_turns=3", "rollout.max_new_tokens=8", "rollout.min_new_tokens=3")
    model = sharpened(actor, tok, eos_boost=50.0)
    chat = chat_of(tok)
    assert tok.eos_token_id in chat.stop_ids
    decoder = fast.decoder.StaticDecoder(model, 4, cfg, chat.stop_ids, chat.pad_id)
    torch.manual_seed(0)
    got = rollout.play_episodes(rollout.LLMPolicy(rollout.RolloutModel(model, chat, decoder), cfg, 1.0), chat, cfg,
                                [0, 1, 2, 3], [0, 1, 2, 3])
    replies = [reply for trajectory in got for reply in replies_of(trajectory)]
    assert len(replies) == 12  # 3 turns each: the malformed answers earn the format penalty, and play on
    assert all(len(reply) == 4 and reply[-1] == tok.eos_token_id for reply in replies)


def test_a_new_policy_never_reuses_the_cache_of_old_weights(tok_actor):
    """The same decoder serves the next iteration's rollout after the weights changed: a new LLMPolicy
    must not continue the old rows, even where the contexts would match them."""
    tok, actor = tok_actor
    cfg = ns("env.name=sokoban", "env.max_turns=2", "rollout.max_new_tokens=6")
    model = sharpened(actor, tok)
    chat = chat_of(tok)
    decoder = fast.decoder.StaticDecoder(model, 4, cfg, chat.stop_ids, chat.pad_id)
    policy = rollout.LLMPolicy(rollout.RolloutModel(model, chat, decoder), cfg, 0.0)
    first = rollout.play_episodes(policy, chat, cfg, [1, 2], [1, 2])
    with torch.no_grad():
        for param in model.parameters():
            param.mul_(1.5)
    contexts = [t.ids for t in first]  # they continue the rows the decoder holds
    expected = rollout.LLMPolicy(rollout.RolloutModel(model, chat), cfg, 0.0)(contexts)
    assert rollout.LLMPolicy(rollout.RolloutModel(model, chat, decoder), cfg, 0.0)(contexts) == expected


def test_static_decoder_rows_without_a_conversation_never_hold_up_a_turn(tok_actor):
    """A decoder of 4 rows given 2 contexts: its 2 spare rows would never stop (no end-of-turn boost
    there), the 2 live rows stop at once. The turn ends at the first finished-check, 8 tokens, not
    at max_new_tokens=40: rows that carry no conversation count as stopped from the start."""
    tok, actor = tok_actor
    cfg = ns("rollout.engine=fast", "rollout.max_new_tokens=40", "rollout.max_context=96")
    model = sharpened(actor)
    offset = torch.zeros(4, model.config.vocab_size)  # (rows, V): the decoder's rows, always 4
    offset[:2, tok.eos_token_id] = 100.0
    hook = model.get_output_embeddings().register_forward_hook(lambda module, args, out: out + offset)
    decoder = fast.decoder.StaticDecoder(model, 4, cfg, [tok.eos_token_id], tok.pad_token_id)
    try:
        out = decoder.generate([[5, 6, 7], [8, 9]], 0.0)
    finally:
        hook.remove()
    assert out.tolist() == [[tok.eos_token_id] + [tok.pad_token_id] * 7] * 2


def test_fuse_computes_what_the_separate_layers_did_and_keeps_their_parameters():
    """Three linear layers reading one input, as q, k and v do: the fused product equals theirs, hand-made
    weights included; each layer keeps its Parameter object (an optimiser holds it) and computes what it
    did; and writing into a layer's weight, as models.copy_weights does, changes the fused weight."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(4, n) for n in (4, 2, 2)]
    with torch.no_grad():
        layers[1].weight.copy_(torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 2.0]]))
        layers[1].bias.copy_(torch.tensor([0.5, -1.0]))
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    before = [layer(x) for layer in layers]
    params = [layer.weight for layer in layers]
    weight, bias = fast.decoder.fuse(layers)
    assert weight.shape == (8, 4) and bias.shape == (8,)
    fused = torch.nn.functional.linear(x, weight, bias)
    assert fused[0, 4:6].tolist() == [1.5, 7.0]  # layer 1 by hand: x0 + 0.5, 2 x3 - 1
    assert torch.equal(torch.cat(before, -1), fused)
    assert [layer.weight for layer in layers] == params and all(p.requires_grad for p in params)
    assert all(torch.equal(layer(x), out) for layer, out in zip(layers, before))
    again, _ = fast.decoder.fuse(layers)  # a second decoder of the same model: the same fused memory
    with torch.no_grad():
        layers[2].weight.copy_(torch.ones(2, 4))
    assert weight[6:].tolist() == again[6:].tolist() == [[1.0] * 4] * 2
    swapped, _ = fast.decoder.fuse([layers[2], layers[1]])  # other blocks in another order: fused anew
    assert swapped.data_ptr() != weight.data_ptr()
    assert torch.equal(swapped, torch.cat([layers[2].weight, layers[1].weight]))


def test_a_fused_layer_trains_as_the_unfused_one():
    """On the CPU with rollout.engine=fast the actor samples and trains itself: its fused layers must get
    the same gradients and AdamW steps as unfused ones, and the fused tensors must follow the steps."""
    torch.manual_seed(0)
    plain = [torch.nn.Linear(4, n) for n in (3, 2)]
    fused_layers = [torch.nn.Linear(4, n) for n in (3, 2)]
    for a, b in zip(plain, fused_layers):
        b.load_state_dict(a.state_dict())
    weight, _ = fast.decoder.fuse(fused_layers)
    x = torch.randn(5, 4)
    for layers in (plain, fused_layers):
        optimizer = torch.optim.AdamW([p for layer in layers for p in layer.parameters()], lr=0.1)
        for _ in range(2):
            optimizer.zero_grad()
            sum((layer(x) ** 2).sum() for layer in layers).backward()
            optimizer.step()
    for a, b in zip(plain, fused_layers):
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
    assert torch.equal(weight, torch.cat([layer.weight for layer in plain]))


def test_a_model_the_decoder_cannot_run_gets_generate_or_a_clear_error(tok_actor, capsys):
    """GPT-2 has no Llama layers: rollout.engine=fast names the key and what to set instead, and the decoder
    itself refuses it; rollout.engine=auto on a GPU samples it with generate() and says so, as
    rollout.engine=hf does everywhere."""
    tok, _ = tok_actor
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2,
                                       bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id))
    assert "gpt2" in fast.decoder.unsupported(model)
    with pytest.raises(SystemExit, match="rollout.engine=fast.*use rollout.engine=auto or hf"):
        models.resolve_engine(ns("rollout.engine=fast"), model, CPU)
    with pytest.raises(ValueError, match="rollout.engine=hf"):
        fast.decoder.StaticDecoder(model, 2, ns(), [tok.eos_token_id], tok.pad_token_id)
    assert models.resolve_engine(ns("rollout.engine=hf"), model, CPU) == "hf"
    hf = ns("rollout.engine=hf")
    engine = models.choose_engine(hf, model, CPU)
    assert launch.build_rollout_model(model, chat_of(tok), hf, CPU, engine).decoder is None
    assert not fast.runs(model, ns("rollout.engine=auto"), torch.device("cuda"))
    assert "gpt2" in capsys.readouterr().out


SMALL = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=256)
ACCEPTED = {  # what each configuration exercises
    "qwen2 q/k/v biases": ("qwen2", {}),
    "qwen2 G = H, untied LM head": ("qwen2", dict(num_key_value_heads=4, tie_word_embeddings=False)),
    "llama G = 1, head_dim 32 != 64/4, biases": ("llama", dict(num_key_value_heads=1, head_dim=32,
                                                               attention_bias=True, mlp_bias=True)),
    "llama rope llama3": ("llama", dict(rope_parameters=dict(
        rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=16))),
    "llama rope yarn": ("llama", dict(rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                                           original_max_position_embeddings=16))),
    "llama rope linear": ("llama", dict(rope_parameters=dict(rope_type="linear", rope_theta=10000.0,
                                                             factor=2.0))),
}


def small_model(family, extra):
    """A random model of 2 layers with every 1-D parameter (biases, norm weights) drawn too: at init
    they are 0 and 1, which would hide a bias left out or a norm weight ignored."""
    torch.manual_seed(0)
    config = (Qwen2Config if family == "qwen2" else LlamaConfig)(**{**SMALL, **extra})
    model = (Qwen2ForCausalLM if family == "qwen2" else LlamaForCausalLM)(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 1:
                param.uniform_(0.5, 1.5)
    return model


@pytest.mark.parametrize("name", ACCEPTED)
def test_forward_gives_the_models_own_logits(name):
    """A left-padded prefill of three sequences (3, 7 and 5 tokens), then three decoding steps: after
    each, fast.decoder.forward's logits for every row equal the model's forward over that row's
    unpadded sequence so far (float32)."""
    model = small_model(*ACCEPTED[name])
    assert fast.decoder.unsupported(model) is None
    L = 16
    # its fused weights and cache
    decoder = fast.decoder.StaticDecoder(model, 3, ns(f"rollout.max_context={L}"), [0], 0)
    fused, keys, values = decoder.fused, decoder.keys, decoder.values
    generator = torch.Generator().manual_seed(1)
    rows = [torch.randint(1, 97, (n,), generator=generator).tolist() for n in (3, 7, 5)]
    ids, block_mask = rollout.left_pad(rows, pad_id=0)  # (3, 7)
    mask = torch.zeros(3, L, dtype=torch.long)
    mask[:, :7] = block_mask
    positions = (block_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = fast.decoder.forward(model, fused, keys, values, ids, positions, torch.arange(7),
                                      fast.decoder.visible_slots(mask, torch.arange(7), 7))
        for slot in range(7, 10):
            expected = torch.stack([model(torch.tensor([row])).logits[0, -1] for row in rows])
            torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)
            token = torch.randint(1, 97, (3,), generator=generator)
            rows = [row + [int(t)] for row, t in zip(rows, token)]
            mask[:, slot] = 1
            position = torch.tensor([[len(row) - 1] for row in rows])
            reading = fast.decoder.Rows(mask, torch.ones(3, dtype=torch.bool), torch.zeros(3, dtype=torch.long),
                                        torch.tensor([slot]), slot + 1)
            logits = fast.decoder.forward(model, fused, keys, values, token[:, None], position, reading.slot,
                                          reading, fast.decoder.window_rows_attention)


@pytest.mark.parametrize("name, extra, why", [
    ("rope dynamic", dict(rope_parameters=dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0)),
     "RoPE type dynamic"),
    ("sliding window", dict(use_sliding_window=True, sliding_window=8), "sliding-window")])
def test_configurations_the_forward_cannot_follow_are_refused(name, extra, why):
    """Dynamic RoPE rescales its angles with the context length (a branch on data, which a captured step
    cannot take), and a sliding window hides old slots, which forward does not."""
    assert why in fast.decoder.unsupported(small_model("qwen2", extra))


@pytest.mark.parametrize("name", ["qwen2 q/k/v biases", "llama rope yarn"])
@pytest.mark.slow
def test_the_decoding_step_traces_as_one_graph(name):
    """torch.compile(fullgraph=True) of the decoding step, as the decoder compiles it on a GPU: traced here
    without code generation (the eager backend), so a construct that breaks the graph fails on the CPU too."""
    model = small_model(*ACCEPTED[name])
    decoder = fast.decoder.StaticDecoder(model, 2, ns("rollout.max_context=32"), [0], 0)
    step = torch.compile(functools.partial(fast.decoder.decoding_step, model, decoder.fused, decoder.keys,
                                           decoder.values, fast.decoder.window_rows_attention),
                         fullgraph=True, backend="eager")
    zeros = torch.zeros((2, 1), dtype=torch.long)
    rows = fast.decoder.Rows(decoder.mask, decoder.writing, decoder.first, torch.zeros(1, dtype=torch.long), 32)
    with torch.no_grad():
        token = step(zeros, zeros, rows, torch.tensor(1.0), torch.tensor([0]), torch.tensor(True))
    assert token.shape == (2,)


@pytest.mark.slow
def test_the_decoding_step_compiles_twice_for_every_window_up_to_the_whole_cache():
    """The decoder passes each turn's window, a multiple of WINDOW_STEP up to rollout.max_context, to its
    compiled step. torch.compile specialises on the first window, then compiles once for any window; a window
    that took a whole cache tensor (a slice of every slot) would compile a third time, in the middle of a run.
    Traced with a backend that counts the graphs it is given."""
    torch._dynamo.reset()  # what other tests compiled of the same code would count as earlier windows
    model = small_model(*ACCEPTED["qwen2 q/k/v biases"])
    decoder = fast.decoder.StaticDecoder(model, 2, ns("rollout.max_context=32"), [0], 0)
    graphs, counting_backend = graph_counter()
    step = torch.compile(functools.partial(fast.decoder.decoding_step, model, decoder.fused, decoder.keys,
                                           decoder.values, fast.decoder.window_rows_attention),
                         fullgraph=True, backend=counting_backend)
    zeros = torch.zeros((2, 1), dtype=torch.long)
    with torch.no_grad():
        for window in (8, 16, 24, 32):  # 32 = rollout.max_context: every slot the decoder may use
            decoder.mask[:, :window] = 1
            rows = fast.decoder.Rows(decoder.mask, decoder.writing, decoder.first, torch.tensor([window - 1]),
                                     window)
            step(zeros, zeros, rows, torch.tensor(1.0), torch.tensor([0]), torch.tensor(True))
    assert len(graphs) == 2


@pytest.mark.slow
def test_the_prefill_layer_traces_once_for_all_layers_and_widths():
    """On a GPU the decoder compiles decoder_layer for the prefills, for any width: one graph must serve
    every layer (their modules differ, the code does not) and, after the first turn, every width and
    first slot. Traced here with a backend that counts the graphs it is given (no code generation), and
    the logits must be those of the uncompiled forward."""
    model = small_model(*ACCEPTED["qwen2 q/k/v biases"])
    decoder = fast.decoder.StaticDecoder(model, 2, ns("rollout.max_context=32"), [0], 0)
    graphs, counting_backend = graph_counter()
    layer = torch.compile(fast.decoder.decoder_layer, fullgraph=True, dynamic=True, backend=counting_backend)
    generator = torch.Generator().manual_seed(0)
    # a first turn, then turns that continue the cache, the last up to its last slot
    for start, width in ((0, 5), (5, 9), (14, 3), (17, 6), (23, 9)):
        ids = torch.randint(1, 97, (2, width), generator=generator)
        positions = torch.arange(start, start + width).expand(2, width)
        slots = torch.arange(start, start + width)
        decoder.mask[:, start:start + width] = 1
        with torch.no_grad():
            cache = (decoder.fused, decoder.keys, decoder.values)
            visible = fast.decoder.visible_slots(decoder.mask, slots, start + width)
            compiled = fast.decoder.forward(model, *cache, ids, positions, slots, visible, run_layer=layer)
            plain = fast.decoder.forward(model, *cache, ids, positions, slots, visible)
        torch.testing.assert_close(compiled, plain)
    # the first turn's graph takes the window to be the width (they are equal there); one more for the rest
    assert len(model.model.layers) == 2 and len(graphs) == 2


def test_the_two_stage_race_draws_from_the_softmax():
    """Rows alternate between two score vectors over a vocabulary of 211 tokens (not a square: 15 blocks of
    15, the last one padded), each with 30 tokens barred (-inf, two whole blocks) and one favoured, 60,000
    draws each: per vector, each token's frequency against its softmax probability (a chi-square over the
    tokens expected at least 5 times), and no barred token. Two vectors: a row that took its token from
    another row's block would show."""
    generator = torch.Generator().manual_seed(0)
    V, draws = 211, 60_000
    scores = torch.randn(2, V, generator=generator)
    scores[0, 7] += 6.0
    scores[1, 200] += 6.0
    scores[0, 30:60] = float("-inf")    # the blocks 30-44 and 45-59
    scores[1, 150:180] = float("-inf")  # the blocks 150-164 and 165-179
    torch.manual_seed(0)
    tokens = fast.decoder.two_stage_race(scores.repeat(draws, 1))  # rows 0, 2, 4, ... score as vector 0
    for k, barred in ((0, slice(30, 60)), (1, slice(150, 180))):
        counts = torch.bincount(tokens[k::2], minlength=V).double()
        expected = torch.softmax(scores[k].double(), -1) * draws
        assert counts[barred].sum() == 0
        seen = expected >= 5
        chi2 = ((counts[seen] - expected[seen]) ** 2 / expected[seen]).sum().item()
        dof = int(seen.sum()) - 1
        assert chi2 < dof + 5 * (2 * dof) ** 0.5, (k, chi2, dof)  # mean dof, standard deviation sqrt(2 dof)


GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="the rows' kernel is Triton's, for a GPU")


@GPU
@pytest.mark.parametrize("heads, kv_heads", [(9, 3), (14, 2)], ids=["smollm2", "qwen2.5"])
def test_the_rows_kernel_gives_pytorchs_attention_for_the_rows_writing(heads, kv_heads):
    """bfloat16, 64 rows over 700 slots: left padding, a long stretch of padding inside one row (whole blocks
    skipped), random single padding slots, a third of the rows stopped. The writing rows' outputs equal
    PyTorch's attention (float32) over each row's real slots up to the current one, as closely as PyTorch's
    own attention in bfloat16 does; the stopped rows' are zero."""
    from fast.rows_attention import rows_attention
    generator = torch.Generator(device="cuda").manual_seed(0)
    B, L, d, slot = 64, 700, 64, 650
    q, k, v = (torch.randn(shape, device="cuda", generator=generator).bfloat16()
               for shape in ((B, heads, 1, d), (B, kv_heads, L, d), (B, kv_heads, L, d)))
    mask = (torch.rand(B, L, device="cuda", generator=generator) > 0.1).long()
    mask[:, slot + 1:] = 0
    mask[0, :300] = 0
    mask[1, 64:400] = 0
    mask[:, slot] = 1
    writing = torch.rand(B, device="cuda", generator=generator) > 0.33
    first = mask.argmax(1)
    rows = fast.decoder.Rows(mask, writing, first, torch.tensor([slot], device="cuda"), None)
    got = rows_attention(q, k, v, rows, 0.125).float()
    visible = mask[:, None, None, :slot + 1].bool()
    exact = fast.decoder.attention(q.float(), k.float(), v.float(), visible, 0.125)
    in_bf16 = fast.decoder.attention(q, k, v, visible, 0.125).float()
    tolerance = (in_bf16 - exact)[writing].abs().max().item()
    assert (got - exact)[writing].abs().max().item() <= 2 * tolerance
    assert torch.all(got[~writing] == 0)


@GPU
def test_on_a_gpu_rollouts_with_the_rows_kernel_equal_generate(tok_actor):
    """The multi-turn test above on a GPU, where the decoding step is compiled, captured in CUDA graphs and
    runs the rows' kernel (float32, exact products): greedy rollouts equal generate's token for token."""
    tok, actor = tok_actor
    cfg = ns("env.name=sokoban", "env.max_turns=5", "rollout.max_new_tokens=12", "rollout.max_context=785")
    model = sharpened(copy.deepcopy(actor).cuda(), tok, eos_boost=1.0)
    chat = chat_of(tok)
    seeds = list(range(10))
    plain = rollout.LLMPolicy(rollout.RolloutModel(model, chat), cfg, 0.0)
    expected = rollout.play_episodes(plain, chat, cfg, seeds, seeds)
    decoder = fast.decoder.StaticDecoder(model, 12, cfg, chat.stop_ids, chat.pad_id)
    got = rollout.play_episodes(rollout.LLMPolicy(rollout.RolloutModel(model, chat, decoder), cfg, 0.0), chat, cfg,
                                seeds, seeds)
    assert [t.ids for t in got] == [t.ids for t in expected]
    replies = [len(r) for t in expected for r in replies_of(t)]
    assert min(replies) < 12 and max(replies) == 12  # some rows stopped while others wrote


def test_docstring_examples_are_true():
    result = doctest.testmod(fast.decoder)
    assert result.attempted >= 9 and result.failed == 0
    result = doctest.testmod(fast.gae)
    assert result.attempted >= 2 and result.failed == 0


# ================================================================================================
# The packed GAE, the compiled layers and log-softmax: the readable functions' numbers
# ================================================================================================
@pytest.mark.parametrize("gae", [fast.gae.compute_gae_packed, fast.compute_gae], ids=["packed", "engine"])
@pytest.mark.parametrize("case", gae_cases())
def test_the_fast_gae_matches_the_stored_numbers(case, gae):
    check_gae_against_stored(gae, case)


@pytest.mark.parametrize("seed", range(5))
def test_the_fast_gae_equals_compute_gae_on_random_multi_turn_batches(seed):
    """Random rewards, values and multi-turn masks (an empty row among them): the packed GAE gives
    starpo.compute_gae's advantages and returns, float64 to 1e-12."""
    rng = np.random.default_rng(seed)
    B, T = 6, 40
    r, v = torch.tensor(rng.normal(size=(B, T))), torch.tensor(rng.normal(size=(B, T)))
    mask = torch.tensor(multi_turn_mask(rng, B, T))
    gamma, lam = 0.99, 0.9
    expected = starpo.compute_gae(r, v, mask, gamma, lam)
    for got, want in zip(fast.compute_gae(r, v, mask, gamma, lam), expected):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rows, width", [(3, 5), (3, 8), (3, 13), (1, 13)])
def test_the_padded_forward_gives_the_hidden_states_and_gradients_of_the_plain_one(rows, width):
    """padded_forward (fast/compile.py) pads the trainer's rows to a multiple of 8 columns and at least 2 rows
    and cuts the hidden states back: they and the weights' gradients equal those of the backbone's own
    forward on the unpadded rows."""
    plain, padded = small_model(*ACCEPTED["qwen2 q/k/v biases"]), small_model(*ACCEPTED["qwen2 q/k/v biases"])
    backbone = padded.model
    own_forward = type(backbone).forward.__get__(backbone)
    backbone.forward = functools.partial(fast.compile.padded_forward, own_forward)
    ids = torch.randint(1, 97, (rows, width), generator=torch.Generator().manual_seed(width))
    hidden = []
    for model in (plain, padded):
        h = ragen_mini.hidden_states(model.model, ids)
        h.square().mean().backward()
        hidden.append(h.detach())
    assert hidden[1].shape == (rows, width, 64)
    torch.testing.assert_close(hidden[1], hidden[0], rtol=1e-5, atol=1e-5)
    for p, q in zip(plain.parameters(), padded.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_compiled_layers_compute_what_eager_layers_do_and_compile_once(tok_actor):
    """fast.compile_backbone, as the fast engine runs scoring and update on a GPU: the hidden states and the
    weight gradients equal those of transformers' eager layers (float32 on the CPU) for three widths, and the
    layers share one compiled code for all of them: one graph, not one per layer (a KV cache in the forward
    would index by layer), nor one more for a width past a multiple of 8, nor for a micro-batch of one row
    (torch.compile specialises a size of 1)."""
    import copy

    from torch._dynamo.utils import counters
    eager, compiled = copy.deepcopy(tok_actor[1]).train(), copy.deepcopy(tok_actor[1]).train()
    fast.compile_backbone(compiled.base_model)
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(3)
    for rows, width in ((3, 9), (3, 14), (3, 24), (1, 14)):
        ids = torch.randint(0, eager.config.vocab_size, (rows, width))
        mask = torch.ones_like(ids)
        mask[rows // 2, -4:] = 0  # right padding, as in training batches
        hidden = []
        for model in (eager, compiled):
            model.zero_grad()
            h = ragen_mini.hidden_states(model.base_model, ids)
            (h * mask[..., None]).square().mean().backward()
            hidden.append(h.detach())
        torch.testing.assert_close(hidden[1], hidden[0], rtol=1e-4, atol=1e-4)
        for p, q in zip(eager.parameters(), compiled.parameters()):
            if p.grad is not None:
                torch.testing.assert_close(q.grad, p.grad, rtol=1e-3, atol=1e-5)
    assert counters["stats"]["unique_graphs"] == 1


@pytest.mark.slow
def test_the_compiled_log_softmax_gives_log_probs_and_entropies():
    """The compiled copy of starpo.logprob_and_entropy (compiled here on the CPU) against torch's own
    log_softmax at temperature 0.7: log pi(target) and the entropy -sum(p log p), and the same gradient."""
    generator = torch.Generator().manual_seed(0)
    logits = (torch.randn(6, 50, generator=generator) * 3).requires_grad_()
    targets = torch.randint(0, 50, (6,), generator=generator)
    logp, entropy = fast.compile.compiled_logprob_and_entropy(logits, targets, 0.7, True)
    log_probs = torch.log_softmax(logits.detach().double() / 0.7, -1)
    torch.testing.assert_close(logp.double(), log_probs[torch.arange(6), targets], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy.double(), -(log_probs.exp() * log_probs).sum(-1), rtol=1e-5, atol=1e-5)
    logp.sum().backward()
    expected = torch.nn.functional.one_hot(targets, 50) / 0.7 - torch.softmax(logits.detach() / 0.7, -1) / 0.7
    torch.testing.assert_close(logits.grad, expected.float(), rtol=1e-5, atol=1e-5)


class OnTheGpu(torch.Tensor):
    """A CPU tensor that says it is on a GPU, to see which function fast.compile.logprob_and_entropy picks."""
    @property
    def is_cuda(self):
        return True


def test_a_lone_row_is_scored_by_starpos_own_log_softmax(monkeypatch):
    """On a GPU the compiled log-softmax scores every chunk but one of a single token, which would compile it
    anew mid-run (torch.compile specialises a size of 1); starpo's own function scores that one."""
    rows_compiled = []
    monkeypatch.setattr(fast.compile, "compiled_logprob_and_entropy",
                        lambda logits, *args: rows_compiled.append(len(logits)) or
                        starpo.logprob_and_entropy(logits, *args))
    generator = torch.Generator().manual_seed(0)
    for rows in (5, 1, 2):
        logits = torch.randn(rows, 50, generator=generator).as_subclass(OnTheGpu)
        targets = torch.randint(0, 50, (rows,), generator=generator)
        logp, _ = fast.compile.logprob_and_entropy(logits, targets, 0.7)
        expected = torch.log_softmax(logits.as_subclass(torch.Tensor).double() / 0.7, -1)[range(rows), targets]
        torch.testing.assert_close(logp.as_subclass(torch.Tensor).double(), expected, rtol=1e-5, atol=1e-5)
    assert rows_compiled == [5, 2]


# ================================================================================================
# rollout.engine, the one switch
# ================================================================================================
READABLE_ONLY = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import config, models, ragen_mini
overrides = {[*SMALL_RUN, *BANDIT, "train.iterations=1", "eval.every=0"]!r}
for engine in ("hf", "auto"):
    ragen_mini.main(["--config", {TINY_YAML!r}, *overrides, f"run_dir={{sys.argv[1]}}/" + engine,
                     f"rollout.engine={{engine}}"])
    assert "fast" not in sys.modules and "fast.decoder" not in sys.modules, engine
cfg = config.namespace(config.load_config({TINY_YAML!r}, [*overrides, "rollout.engine=fast"]))
tokenizer, actor = models.load_models(cfg, models.train_device(cfg))
assert models.resolve_engine(cfg, actor, models.train_device(cfg)) == "fast"
assert models.choose_engine(cfg, actor, models.train_device(cfg)).fast is sys.modules["fast"]
print("ok")
"""


@pytest.fixture(scope="module")
def command_lines(tmp_path_factory):
    """{test: (its folder, its finished process)} of the two tests below that start Python processes of their
    own, two at a time: READABLE_ONLY, and bench/compare.py, which trains in one process after the other. Each
    spends seconds importing torch and trains the tiny model, mostly on one core."""
    readable, runs = tmp_path_factory.mktemp("readable"), tmp_path_factory.mktemp("compare") / "runs"
    commands = {"readable": (readable, readable, [sys.executable, "-c", READABLE_ONLY, str(readable)]),
                "compare": (runs, ROOT, [sys.executable, "bench/compare.py", str(ROOT), "--bench", "3", "--config",
                                         TINY_YAML, "--runs", str(runs), *SMALL_RUN, *BANDIT, "warmup.steps=0"])}

    def run(name):
        folder, cwd, command = commands[name]
        return folder, subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    return dict(zip(commands, two_at_once(run, commands)))


@pytest.mark.slow
def test_the_readable_path_never_imports_the_fast_package(command_lines):
    """A fresh process trains one tiny iteration with rollout.engine=hf, and one with auto on the CPU (which
    resolves to hf): neither imports fast/. The same process then switches it on with rollout.engine=fast."""
    _, done = command_lines["readable"]
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_auto_is_the_readable_path_on_the_cpu_and_fast_on_a_gpu(tok_actor):
    """auto: hf (the readable path) on the CPU; on a GPU fast for the tiny model (Qwen2 layers). The device is
    only read, so the GPU's answer is checked here too. choose_engine hands out the package's functions for fast
    alone, starpo's otherwise."""
    _, actor = tok_actor
    assert models.resolve_engine(ns("rollout.engine=auto"), actor, CPU) == "hf"
    assert models.resolve_engine(ns("rollout.engine=auto"), actor, torch.device("cuda")) == "fast"
    assert models.resolve_engine(ns("rollout.engine=fast"), actor, CPU) == "fast"
    assert models.choose_engine(ns("rollout.engine=fast"), actor, CPU) == models.Engine(
        "fast", fast.logprob_and_entropy, fast.compute_gae, fast)
    readable = models.Engine("hf", starpo.logprob_and_entropy, starpo.compute_gae)
    assert models.choose_engine(ns("rollout.engine=auto"), actor, CPU) == readable
    assert models.choose_engine(ns("rollout.engine=hf"), actor, torch.device("cuda")) == readable


@pytest.mark.parametrize("section, key", [("rollout", "cache"), ("model", "compile")])
def test_a_key_the_schema_lacks_is_refused_by_name(section, key, tmp_path):
    """A key config.yaml does not hold (rollout.engine is the engine's), on the command line, in a config file and
    in a run folder's config.yaml: each is refused as an unknown config key, named."""
    with pytest.raises(config.ConfigError, match=f"^command line: unknown config key '{section}.{key}'"):
        config.load_config(None, [f"{section}.{key}=true"])
    (tmp_path / "old.yaml").write_text(f"{section}:\n  {key}: true\n")
    with pytest.raises(config.ConfigError, match=f"old.yaml: unknown config key '{section}.{key}'"):
        config.load_config(str(tmp_path / "old.yaml"))
    run = tmp_path / "run"
    run.mkdir()
    saved = config.load_config(None)
    saved[section][key] = True
    (run / "config.yaml").write_text(config.yaml.safe_dump(saved))
    with pytest.raises(config.ConfigError, match=f"config.yaml: unknown config key '{section}.{key}'"):
        config.load_run_config(str(run))


def test_only_models_py_imports_the_fast_package():
    """The one place: of the repository's modules outside fast/, only models.py (choose_engine) imports it. The
    tests and the benchmarks use it as a package, and are not counted."""
    importing = []
    for folder, subfolders, files in os.walk(ROOT):
        skipped = ("fast", "tests", "bench")
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in skipped]
        for name in files:
            if name.endswith(".py"):
                path = Path(folder) / name
                if re.search(r"^\s*(import fast\b|from fast\b)", path.read_text(encoding="utf-8"), re.M):
                    importing.append(str(path.relative_to(ROOT)))
    assert importing == ["models.py"]


def test_compare_gives_a_checkout_from_before_the_engine_its_old_keys(tmp_path):
    """bench/compare.py runs --bench in another checkout: one whose config.yaml has no rollout.engine (the
    keys rollout.cache and model.compile) gets the engine in those keys; this checkout gets the overrides as
    given."""
    sys.path.insert(0, str(ROOT / "bench"))
    import compare
    (tmp_path / "config.yaml").write_text("rollout:\n  cache: auto\nmodel:\n  compile: true\n")
    given = ["rollout.engine=hf", "algo.micro_batch_size=8"]
    assert compare.for_checkout(str(tmp_path), given) == ["rollout.cache=dynamic", "model.compile=false",
                                                          "algo.micro_batch_size=8"]
    assert compare.for_checkout(str(tmp_path), ["rollout.engine=fast"]) == ["rollout.cache=static",
                                                                            "model.compile=true"]
    assert compare.for_checkout(str(tmp_path), ["rollout.engine=auto"]) == []
    assert compare.for_checkout(str(ROOT), given) == given


@pytest.mark.slow
def test_compare_trains_a_preset_in_each_checkout_and_tables_the_medians(command_lines):
    """bench/compare.py --config: K iterations of a preset in each checkout (here this one twice), run folders
    under --runs; each table line holds the median over both runs' iterations 2..K, recomputed here from their
    metrics.jsonl, and the generation time per decoding step."""
    runs, done = command_lines["compare"]
    assert done.returncode == 0, done.stderr[-3000:]
    folders = sorted(runs.iterdir())
    assert len(folders) == 2
    table = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines() if line.startswith("perf/")}
    for folder, column in zip(folders, (0, 1)):  # 1-<name>: this checkout, 2-<name>: the baseline
        rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        assert [row["iteration"] for row in rows] == [1, 2, 3]
        for key in ("perf/iteration_s", "perf/update_s"):
            expected = sorted(row[key] for row in rows[1:])
            assert float(table[key][column]) == pytest.approx((expected[0] + expected[1]) / 2, abs=0.006)
        per_step = sorted(1000 * row["perf/generate_s"] / row["perf/decode_steps"] for row in rows[1:])
        assert float(table["perf/generate_ms_per_step"][column]) == pytest.approx(sum(per_step) / 2, abs=0.006)
    # how many times faster this checkout is: a time's ratio is the baseline's over this one's, a rate's the other
    for key, (faster, slower) in {"perf/generate_ms_per_step": (1, 0), "perf/gen_tokens_per_s": (0, 1)}.items():
        ratio = float(table[key][faster]) / float(table[key][slower])
        assert float(table[key][2].rstrip("x")) == pytest.approx(ratio, rel=0.02, abs=0.006)
