"""In-process models: what lets ragen-mini run with no download at all.

Where no model hub is in reach, everything must still run and be tested. So, besides the
real path (`from_pretrained("Qwen/Qwen2.5-0.5B-Instruct")`, see models.load_models), two models can be
built here from a transformers config, with random weights:

  model.name: tiny                 ~1M parameters, trains on a laptop CPU (the tiny preset, tests).
  model.name: random-qwen2.5-0.5b  Qwen2.5-0.5B's exact shape (24 layers, hidden 896, vocabulary
                                   151,936): the same compute and memory as the real weights, for GPU
                                   speed measurements (ragen_mini.py --bench).

Both use a tokenizer built here too: byte-level BPE (so decode(encode(x)) == x for any NFC text, which
every env text is) trained in a fraction of a second on the texts the environments produce (env_corpus),
plus a ChatML chat template like Qwen's (`<|im_start|>role\\n...<|im_end|>\\n`). Trained on that narrow
corpus, a vocabulary of a few hundred tokens turns action names and instruction words into single tokens,
which keeps the tiny model's sequences short. Grid rows are the exception: every cell stays its own token (see
GRID_CELL below), because a model that must find "P" in a 4x4 map learns far faster when the player's
row and column are token positions than when they hide inside merged pieces such as "_PO" or "#P".
"""
import random

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

from envs import make_env, random_turn_actions
from rollout import SYSTEM_PROMPT, first_user_message, reward_message, turn_message

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # pad, turn start, end of turn (EOS)
FORMAT_TAGS = ["<think>", "</think>", "<answer>", "</answer>"]  # one token each: the format is 4 tokens
CHATML_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
IN_PROCESS_MODELS = ("tiny", "random-qwen2.5-0.5b")
# A grid cell: one of the Sokoban / FrozenLake symbols (envs.py) in a run of them that ends its line,
# which in the env texts means a grid row. Split off before BPE, so that merges never join two cells:
# "_PO_" is 4 tokens, while "State" and "Phoenix" keep theirs.
GRID_CELL = r"[#_OXPGS√](?=[#_OXPGS√]*(?:\n|$))"


def build_tokenizer(corpus, vocab_size=2048):
    """Train a byte-level BPE tokenizer on `corpus` (a list of strings) and wrap it for transformers.

    Deterministic: the same corpus gives the same vocabulary, so a run can be resumed or re-run.
    >>> tok = build_tokenizer(["Turn 1:\\nState:\\n#__X_#"] * 10, vocab_size=300)
    >>> tok.decode(tok("√ P_S ünïcode", add_special_tokens=False)["input_ids"])
    '√ P_S ünïcode'
    >>> tok.convert_ids_to_tokens(tok("State:\n#__X_#", add_special_tokens=False)["input_ids"])[-6:]
    ['#', '_', '_', 'X', '_', '#']
    """
    bpe = Tokenizer(models.BPE())
    # Qwen2's own pipeline (NFC, its split regex, byte-level) after the grid-cell split. AutoTokenizer
    # reloads a checkpoint's copy as Qwen2Tokenizer, without the grid-cell split; the ids stay the same,
    # since no merge of this vocabulary joins two cells (test_checkpoint_loads_with_auto_classes).
    bpe.normalizer = normalizers.NFC()
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(GRID_CELL), "isolated"),
                                                 pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), "isolated"),
                                                 byte_level])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(corpus, trainer)
    bpe.add_tokens(FORMAT_TAGS)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   chat_template=CHATML_TEMPLATE)


def env_corpus(cfg, num_seeds=64):
    """Every kind of text the in-process tokenizer will see: prompts, observations and answers of all
    three envs (random play), so that BPE merges them into few tokens."""
    corpus, rng = [], random.Random(0)
    for name in ("bandit", "sokoban", "frozenlake"):
        for seed in range(num_seeds):
            env = make_env(name)
            observation, _ = env.reset(seed)
            corpus.append(SYSTEM_PROMPT + first_user_message(env)
                          + turn_message(1, observation, env.max_actions, cfg))
            for turn in range(2, 4):
                actions, total = random_turn_actions(rng, env.actions, 3), 0.0
                corpus.append(f"</think><answer>{' || '.join(actions)}</answer>")
                for action in actions:
                    observation, reward, terminated, truncated, _ = env.step(action)
                    total += reward
                    if terminated or truncated:
                        break
                corpus.append(reward_message(total) + turn_message(turn, observation, 5, cfg))
                if terminated or truncated:
                    break
    return corpus


def model_config(name, vocab_size):
    """The transformers config of an in-process model (random weights are drawn by from_config)."""
    if name == "tiny":
        # Small enough for a 2-core CPU, deep enough to read a grid: 4 layers x 128 wide, ~1M parameters.
        return Qwen2Config(vocab_size=vocab_size, hidden_size=128, intermediate_size=512, num_hidden_layers=4,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                           tie_word_embeddings=True)
    # Qwen2.5-0.5B-Instruct's config.json, numbers for numbers; the vocabulary stays 151,936 rows (the
    # logits are the largest tensor of training) even though our tokenizer uses only its first ids.
    return Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                       num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                       rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)
