"""Does a new micro-batch width compile the update's layers again? Times the tiny model's forward and backward
through the fast engine's compiled backbone (fast.compile_backbone, as scoring and update run it on a GPU) for
64 rows of random tokens at each width in turn, the first call and again. A first call of seconds is a
compilation; TORCH_LOGS=recompiles says which guard failed.

    TORCH_LOGS=recompiles python bench/layer_widths.py [width ...]
"""
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the repository's modules
import fast  # noqa: E402
import models  # noqa: E402
from config import load_config, namespace  # noqa: E402

if not torch.cuda.is_available():
    raise SystemExit("this measures torch.compile's layers on a GPU; a CPU runs them eager")
widths = [int(w) for w in sys.argv[1:]] or [861, 850, 870, 853, 864, 880, 873, 896, 845]
cfg = namespace(load_config(os.path.join(ROOT, "configs", "tiny-gpu.yaml"), ["env.name=sokoban"]))
device = torch.device("cuda")
tokenizer, actor = models.load_models(cfg, device)
fast.compile_backbone(actor.base_model)
generator = torch.Generator().manual_seed(0)
for width in widths:
    ids = torch.randint(5, len(tokenizer) - 1, (64, width), generator=generator).to(device)  # (64, width)
    for attempt in ("first", "again"):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):  # as the trainer runs it
            hidden = actor.base_model(input_ids=ids, use_cache=False).last_hidden_state
        hidden.float().square().mean().backward()
        torch.cuda.synchronize()
        print(f"width {width} ({width % 8} past a multiple of 8), {attempt}: "
              f"{time.perf_counter() - start:.2f} s", flush=True)
