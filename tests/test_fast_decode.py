"""The static decoder keeps a conversation's KV cache from turn to turn (fast_decode.StaticDecoder).

Whole multi-turn rollouts with greedy answers must come out token for token as transformers' `generate`
plays them, turn after turn re-reading the whole conversation, while the recorded forward passes show
that later turns fed only their new tokens, and that the cache started afresh when its slots ran out.
"""
import doctest
import sys
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import fast_decode  # noqa: E402
import ragen_mini  # noqa: E402
import rollout  # noqa: E402
from test_trainer import chat_of, ns, sharpened, tok_actor  # noqa: E402,F401


def prefills(decoder):
    """Records (first slot, width) of every forward that feeds more than one token per row: a prefill
    fills the slots from decoder.next_slot on."""
    seen = []

    def hook(module, args):
        if args[0].shape[1] > 1:
            seen.append((decoder.next_slot, args[0].shape[1]))

    return seen, decoder.model.model.embed_tokens.register_forward_pre_hook(hook)


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
    """A random-init Llama model of the tiny model's size: no biases in q, k, v, another RoPE base (SmolLM2's)."""
    c = actor.config
    torch.manual_seed(1)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, rope_theta=100000.0, tie_word_embeddings=True)).eval()


@pytest.mark.parametrize("family, max_context", [("qwen2", 1024), ("qwen2", 785), ("llama", 785)])
def test_multi_turn_rollouts_equal_generate_and_later_turns_feed_only_new_tokens(tok_actor, family, max_context):
    """Sokoban, 5 turns of up to 12 tokens, 10 trajectories in a decoder of 12 rows (2 spare). Some
    replies stop early (their padding slots must be masked), and with max_context=785 trajectories end at
    different turns (the live rows become a subsequence) and the slots run out (the cache starts afresh):
    the conversations reach 770-807 tokens, and the padding of early stops makes the slots fill faster.
    The decoder runs the layers itself (fast_decode.forward), for Qwen2 and Llama models."""
    tok, actor = tok_actor
    cfg = ns("env.name=sokoban", "env.max_turns=5", "rollout.max_new_tokens=12", f"rollout.max_context={max_context}")
    model = sharpened(actor if family == "qwen2" else llama_like(actor), tok, eos_boost=1.0)
    chat = chat_of(tok)
    seeds = list(range(10))
    expected = rollout.play_episodes(rollout.LLMPolicy(model, chat, cfg, 0.0), chat, cfg, seeds, seeds)
    decoder = fast_decode.StaticDecoder(model, 12, cfg, chat.stop_ids, chat.pad_id)
    seen, handle = prefills(decoder)
    try:
        got = rollout.play_episodes(rollout.LLMPolicy(model, chat, cfg, 0.0, decoder), chat, cfg, seeds, seeds)
    finally:
        handle.remove()
    assert [t.ids for t in got] == [t.ids for t in expected]
    assert [t.sampled for t in got] == [t.sampled for t in expected]
    turns = [len(t.turns) for t in expected]
    replies = [len(r) for t in expected for r in replies_of(t)]
    assert min(replies) < 12 and max(replies) == 12  # some replies stopped early, some ran to the limit
    # the first turn feeds the whole prompts from slot 0; a continuing turn feeds a block after the used
    # slots, only as wide as the longest new part (env reply + the last reply token not yet fed)
    assert seen[0][0] == 0
    first_prompt = min(t.sampled.index(1) for t in expected)
    continued = [(start, width) for start, width in seen[1:] if start > 0]
    assert continued and all(width < first_prompt for _, width in continued)
    if max_context == 1024:
        assert turns == [5] * 10 and len(continued) == 4  # every turn after the first continued the cache
    else:
        assert len(set(turns)) > 1  # trajectories ended at different turns
        assert any(start == 0 for start, _ in seen[1:])  # and the cache started afresh at least once


def test_a_new_policy_never_reuses_the_cache_of_old_weights(tok_actor):
    """The same decoder serves the next iteration's rollout after the weights changed: a new LLMPolicy
    must not continue the old rows, even where the contexts would match them."""
    tok, actor = tok_actor
    cfg = ns("env.name=sokoban", "env.max_turns=2", "rollout.max_new_tokens=6")
    model = sharpened(actor, tok)
    chat = chat_of(tok)
    decoder = fast_decode.StaticDecoder(model, 4, cfg, chat.stop_ids, chat.pad_id)
    first = rollout.play_episodes(rollout.LLMPolicy(model, chat, cfg, 0.0, decoder), chat, cfg, [1, 2], [1, 2])
    with torch.no_grad():
        for param in model.parameters():
            param.mul_(1.5)
    contexts = [t.ids for t in first]  # they continue the rows the decoder holds
    expected = rollout.LLMPolicy(model, chat, cfg, 0.0)(contexts)
    assert rollout.LLMPolicy(model, chat, cfg, 0.0, decoder)(contexts) == expected


def test_static_decoder_rows_without_a_conversation_never_hold_up_a_turn(tok_actor):
    """A decoder of 4 rows given 2 contexts: its 2 spare rows would never stop (no end-of-turn boost
    there), the 2 live rows stop at once. The turn ends at the first finished-check, 8 tokens, not
    at max_new_tokens=40: rows that carry no conversation count as stopped from the start."""
    tok, actor = tok_actor
    cfg = ns("rollout.cache=static", "rollout.max_new_tokens=40", "rollout.max_context=96")
    model = sharpened(actor)
    offset = torch.zeros(4, model.config.vocab_size)  # (rows, V): the decoder's rows, always 4
    offset[:2, tok.eos_token_id] = 100.0
    hook = model.get_output_embeddings().register_forward_hook(lambda module, args, out: out + offset)
    decoder = fast_decode.StaticDecoder(model, 4, cfg, [tok.eos_token_id], tok.pad_token_id)
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
    weight, bias = fast_decode.fuse(layers)
    assert weight.shape == (8, 4) and bias.shape == (8,)
    fused = torch.nn.functional.linear(x, weight, bias)
    assert fused[0, 4:6].tolist() == [1.5, 7.0]  # layer 1 by hand: x0 + 0.5, 2 x3 - 1
    assert torch.equal(torch.cat(before, -1), fused)
    assert [layer.weight for layer in layers] == params and all(p.requires_grad for p in params)
    assert all(torch.equal(layer(x), out) for layer, out in zip(layers, before))
    again, _ = fast_decode.fuse(layers)  # a second decoder of the same model: the same fused memory
    with torch.no_grad():
        layers[2].weight.copy_(torch.ones(2, 4))
    assert weight[6:].tolist() == again[6:].tolist() == [[1.0] * 4] * 2


def test_a_model_the_decoder_cannot_run_gets_generate_or_a_clear_error(tok_actor):
    """GPT-2 has no Llama layers: rollout.cache=static names the key and what to set instead, and the
    decoder itself refuses it; rollout.cache=dynamic samples it with generate()."""
    tok, _ = tok_actor
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2,
                                       bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id))
    assert "gpt2" in fast_decode.unsupported(model)
    with pytest.raises(SystemExit, match="rollout.cache=static.*use auto or dynamic"):
        ragen_mini.sampler_and_decoder(model, chat_of(tok), ns("rollout.cache=static"), torch.device("cpu"))
    with pytest.raises(ValueError, match="rollout.cache=dynamic"):
        fast_decode.StaticDecoder(model, 2, ns(), [tok.eos_token_id], tok.pad_token_id)
    assert ragen_mini.sampler_and_decoder(model, chat_of(tok), ns("rollout.cache=dynamic"), torch.device("cpu")) == (model, None)


def test_docstring_examples_are_true():
    result = doctest.testmod(fast_decode)
    assert result.attempted >= 6 and result.failed == 0
