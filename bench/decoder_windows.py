"""How long does the static decoder take to answer a batch whose contexts need each decoding window in turn
(WINDOW_STEP slots apart, up to rollout.max_context), the first time and again? The first call of a window
that needs a compilation of the decoding step shows it: seconds, where a compiled window takes about one.
Contexts are random token ids, one batch of the preset's size per length; answers run to max_new_tokens
unless a row samples a stop token.

    TORCH_LOGS=recompiles python bench/decoder_windows.py --config configs/smollm2.yaml [key=value ...]

TORCH_LOGS=recompiles makes torch.compile say which guard failed each time it compiles again.
"""
import argparse
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the repository's modules
import launch  # noqa: E402
from config import load_config, namespace  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--config", required=True)
parser.add_argument("overrides", nargs="*")
args = parser.parse_args()
cfg = namespace(load_config(args.config, args.overrides))
device, actor, rollout_model, _ = launch.load_policy(cfg)  # as a run loads them
decoder = rollout_model.decoder
if decoder is None:
    raise SystemExit("this setting samples with generate(), not the static decoder: pass rollout.engine=fast")
batch = cfg.rollout.groups * cfg.rollout.group_size
# one or two new windows each
lengths = range(300, cfg.rollout.max_context - cfg.rollout.max_new_tokens + 1, 260)
generator = torch.Generator().manual_seed(0)
for attempt in ("first", "again"):
    for length in lengths:
        vocab = min(1000, len(rollout_model.chat.tokenizer))
        contexts = torch.randint(10, vocab, (batch, length), generator=generator).tolist()
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = decoder.generate(contexts, cfg.rollout.temperature)
        if device.type == "cuda":
            torch.cuda.synchronize()
        print(f"{attempt}: contexts of {length} tokens, {out.shape[1]} steps: "
              f"{time.perf_counter() - start:.2f} s", flush=True)
