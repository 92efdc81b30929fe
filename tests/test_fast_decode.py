"""The static decoder keeps a conversation's KV cache from turn to turn (fast_decode.StaticDecoder).

Whole multi-turn rollouts with greedy answers must come out token for token as transformers' `generate`
plays them, turn after turn re-reading the whole conversation, while the recorded forward passes show
that later turns fed only their new tokens, and that the cache started afresh when its slots ran out.
"""
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import fast_decode  # noqa: E402
import rollout  # noqa: E402
from test_trainer import chat_of, ns, sharpened, tok_actor  # noqa: E402,F401


def prefills(model):
    """Records (first slot, width) of every forward that feeds more than one token per row."""
    seen = []

    def pre_hook(module, args, kwargs):
        if kwargs["input_ids"].shape[1] > 1:
            seen.append((int(kwargs["cache_position"][0]), kwargs["input_ids"].shape[1]))

    return seen, model.register_forward_pre_hook(pre_hook, with_kwargs=True)


def replies_of(trajectory):
    """The sampled stretches of a trajectory, one per turn."""
    replies, current = [], []
    for token, sampled in zip(trajectory.ids, trajectory.sampled):
        if sampled:
            current.append(token)
        elif current:
            replies, current = replies + [current], []
    return replies + ([current] if current else [])


@pytest.mark.parametrize("max_context", [1024, 785])
def test_multi_turn_rollouts_equal_generate_and_later_turns_feed_only_new_tokens(tok_actor, max_context):
    """Sokoban, 5 turns of up to 12 tokens, 10 trajectories in a decoder of 12 rows (2 spare). Some
    replies stop early (their padding slots must be masked), and with max_context=420 trajectories end at
    different turns (the live rows become a subsequence) and the slots run out (the cache starts afresh):
    the conversations reach 770-807 tokens, and the padding of early stops makes the slots fill faster."""
    tok, actor = tok_actor
    cfg = ns("env.name=sokoban", "env.max_turns=5", "rollout.max_new_tokens=12", f"rollout.max_context={max_context}")
    model = sharpened(actor, tok, eos_boost=1.0)
    chat = chat_of(tok)
    seeds = list(range(10))
    expected = rollout.play_episodes(rollout.LLMPolicy(model, chat, cfg, 0.0), chat, cfg, seeds, seeds)
    decoder = fast_decode.StaticDecoder(model, 12, cfg, chat.stop_ids, chat.pad_id)
    seen, handle = prefills(model)
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
    offset = torch.zeros(4, 1, model.config.vocab_size)  # (rows, 1, V): the decoder's rows, always 4
    offset[:2, :, tok.eos_token_id] = 100.0
    hook = model.get_output_embeddings().register_forward_hook(lambda module, args, out: out + offset)
    decoder = fast_decode.StaticDecoder(model, 4, cfg, [tok.eos_token_id], tok.pad_token_id)
    try:
        out = decoder.generate([[5, 6, 7], [8, 9]], 0.0)
    finally:
        hook.remove()
    assert out.tolist() == [[tok.eos_token_id] + [tok.pad_token_id] * 7] * 2
