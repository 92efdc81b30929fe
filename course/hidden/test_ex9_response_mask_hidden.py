"""Exercise 9 (hidden tests): rollout.append_reply with a Llama 3 chat template, random replies and edge cases."""
import functools
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import adapters  # noqa: E402
import rollout  # noqa: E402
import tiny  # noqa: E402
from test_ex9_response_mask import REPLIES, SYSTEM, USERS, check_conversation, encode, tiny_chat  # noqa: E402

append_reply = adapters.function("ex9-response-mask")

WEIGHTS = {"test_a_llama3_template_conversation": 3, "test_random_replies_against_a_reference": 3}
LLAMA3 = ("{{ '<|begin_of_text|>' }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + "
          "'<|end_header_id|>\\n\\n' + m['content'] + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")


@functools.lru_cache(maxsize=None)
def llama3_chat():
    """The tiny BPE tokenizer with Llama 3's special tokens and chat template: a turn ends with <|eot_id|>."""
    tokenizer = tiny.build_tokenizer([SYSTEM, *USERS, *REPLIES] * 4, vocab_size=300)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|begin_of_text|>", "<|start_header_id|>",
                                                                "<|end_header_id|>", "<|eot_id|>"]})
    tokenizer.chat_template = LLAMA3
    return rollout.chat_format(tokenizer)


def closing_text(response, chat):
    """The reference: the template's closing text less the end-of-turn token's text when the reply holds it."""
    if response and response[-1] == chat.end_of_turn_id:
        return chat.close_assistant.removeprefix(chat.tokenizer.decode([chat.end_of_turn_id]))
    return chat.close_assistant


def test_a_llama3_template_conversation():
    chat = llama3_chat()
    assert chat.close_assistant == "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
    check_conversation(chat)


def test_llama3_closing_texts():
    chat = llama3_chat()
    reply = encode(chat, "</think><answer>Up</answer>")
    assert append_reply([], [], reply + [chat.end_of_turn_id], chat) == "<|start_header_id|>user<|end_header_id|>\n\n"
    assert append_reply([], [], reply, chat) == "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"


def test_random_replies_against_a_reference():
    rng = random.Random(9)
    for chat in (tiny_chat(), llama3_chat()):
        vocab = len(chat.tokenizer)
        for _ in range(50):
            reply = [rng.randrange(vocab) for _ in range(rng.randint(0, 8))]
            if reply and rng.random() < 0.5:
                reply[-1] = chat.end_of_turn_id
            start = [rng.randrange(vocab) for _ in range(rng.randint(0, 5))]
            marks = [rng.randint(0, 1) for _ in start]
            ids, sampled = list(start), list(marks)
            closing = append_reply(ids, sampled, list(reply), chat)
            assert ids == start + reply and sampled == marks + [1] * len(reply), reply
            assert closing == closing_text(reply, chat), reply


def test_the_lists_are_changed_in_place_and_the_reply_is_left_alone():
    chat = tiny_chat()
    ids, sampled, reply = [3], [0], encode(chat, "</think>") + [chat.end_of_turn_id]
    kept_ids, kept_sampled, copy_of_reply = ids, sampled, list(reply)
    closing = append_reply(ids, sampled, reply, chat)
    assert ids is kept_ids and sampled is kept_sampled and reply == copy_of_reply
    assert ids == [3, *reply] and sampled == [0, 1, 1] and isinstance(closing, str)


def test_a_reply_of_the_end_of_turn_token_alone():
    chat = tiny_chat()
    ids, sampled = [], []
    assert append_reply(ids, sampled, [chat.end_of_turn_id], chat) == "\n<|im_start|>user\n"
    assert ids == [chat.end_of_turn_id] and sampled == [1]
