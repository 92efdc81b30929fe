"""Where an iteration of a preset goes, function by function: trains it with timers that wait for the GPU
before and after each timed call (so the sum runs somewhat slower than an untimed run), and writes one JSON
line per iteration: the run's perf/* metrics and t/NAME, the seconds spent in NAME (NAME# its calls).
Timed: the decoder's prefill (feed), decoding (decode), compaction and bookkeeping; the rollout as a whole
(play); the thought-MI measurement (mi); step 3 (score); log-probs and values with and without gradients;
GAE; the update and its clipped steps.

    python bench/profile_iteration.py OUT.jsonl --config configs/smollm2.yaml train.iterations=14 [...]
    python bench/profile_iteration.py OUT.jsonl --alternate-score-tokens 131072 --config ...
        # even iterations score (step 3, the thought MI) in micro-batches of up to N tokens, any rows:
        # t/mi_alt and t/score_alt against t/mi and t/score in one run
    python bench/profile_iteration.py OUT.jsonl --kernels 4 --config ...
        # iteration 4's rollout, thought MI, step 3 and update each under torch.profiler: OUT.NAME.txt has its
        # kernels and ops by GPU time, and its wall time against the GPU's busy time (the gap: the host's)
    python bench/profile_iteration.py OUT.jsonl --gaps 4 --config ...
        # iteration 4's phases under torch.profiler with the timed functions (and backward, gradient
        # clipping, the envs and the tokenizer; torch labels the optimiser's step) as labelled regions, not
        # timers, so nothing waits for the GPU: OUT.NAME.gaps.txt charges the GPU's idle time to the region
        # that launched the work ending each wait (bench/gpu_gaps.py), OUT.NAME.trace.json is the trace
"""
import copy
import json
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import fast.decoder  # noqa: E402
import gpu_gaps  # noqa: E402  (bench/, this script's folder)
import launch  # noqa: E402
import ragen_mini  # noqa: E402
import rollout  # noqa: E402

out_path, args = sys.argv[1], sys.argv[2:]
options = {"--alternate-score-tokens": 0, "--kernels": -1, "--gaps": -1}
for option in options:
    if option in args:
        at = args.index(option)
        options[option], args = int(args[at + 1]), args[:at] + args[at + 2:]
alternate, kernels_at, gaps_at = options.values()
seconds, state = {}, {"iteration": 1}


def kernels(name, fn):
    """fn under torch.profiler at iteration `kernels_at`: its table, sorted by GPU time, into OUT.NAME.txt; at
    iteration `gaps_at`, its GPU's idle time by labelled region into OUT.NAME.gaps.txt."""
    def wrapper(*a, **k):
        if state["iteration"] == gaps_at:
            return gaps(name, fn, *a, **k)
        if state["iteration"] != kernels_at:
            return fn(*a, **k)
        start = time.perf_counter()
        result, profiler = profiled(fn, *a, **k)
        gpu = torch.cuda.is_available()
        table = profiler.key_averages().table(sort_by="self_cuda_time_total" if gpu else "self_cpu_time_total",
                                              row_limit=40, max_name_column_width=70)
        with open(f"{os.path.splitext(out_path)[0]}.{name}.txt", "w") as f:
            f.write(f"{name}, iteration {kernels_at}: {time.perf_counter() - start:.3f} s of wall time under the "
                    f"profiler (which slows the host)\n{table}\n")
        return result
    return wrapper


def profiled(fn, *a, **k):
    """fn(*a, **k) under torch.profiler (the GPU's work too, where there is one, waited for at the end).
    -> (its result, the profiler)"""
    gpu = torch.cuda.is_available()
    with profile(activities=[ProfilerActivity.CPU, *[ProfilerActivity.CUDA] * gpu]) as profiler:
        result = fn(*a, **k)
        if gpu:
            torch.cuda.synchronize()
    return result, profiler


def gaps(name, fn, *a, **k):
    """fn(*a, **k) under torch.profiler, nothing waiting for the GPU but the phase's end; its trace and the
    table of where the GPU waited (gpu_gaps; without a GPU, only the phase's wall time) into
    OUT.NAME.trace.json and OUT.NAME.gaps.txt."""
    base = os.path.splitext(out_path)[0]
    result, profiler = profiled(fn, *a, **k)
    profiler.export_chrome_trace(f"{base}.{name}.trace.json")
    with open(f"{base}.{name}.trace.json") as f:
        events = json.load(f)["traceEvents"]
    with open(f"{base}.{name}.gaps.txt", "w") as f:
        f.write(f"{name}, iteration {gaps_at} (under the profiler, which slows the host)\n"
                f"{gpu_gaps.table(gpu_gaps.gaps(events))}\n")
    return result


def labelled(name, fn):
    """At iteration `gaps_at`, fn inside a record_function region NAME (bench/gpu_gaps.py charges waits to it)."""
    def wrapper(*a, **k):
        if state["iteration"] != gaps_at:
            return fn(*a, **k)
        with record_function(name):
            return fn(*a, **k)
    return wrapper


def timed(name, fn):
    def wrapper(*a, **k):
        if state["iteration"] == gaps_at:  # a region, not a timer: a timer's synchronize would make gaps
            return labelled(name, fn)(*a, **k)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        result = fn(*a, **k)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        key = (name if name != "logp" else "logp_grad" if torch.is_grad_enabled() else "logp_nograd")
        seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - start
        seconds[key + "#"] = seconds.get(key + "#", 0) + 1
        return result
    return wrapper


def alternated(name, fn):
    """fn(..., cfg, device) timed as NAME, or on even iterations as NAME_alt with the alternate scoring."""
    def wrapper(*a):
        if alternate and state["iteration"] % 2 == 0:
            cfg = copy.deepcopy(a[-2])
            cfg.algo.micro_batch_size, cfg.algo.micro_batch_tokens = 1_000_000, alternate
            cfg.algo.score_micro_batch_tokens = alternate
            return timed(name + "_alt", fn)(*a[:-2], cfg, a[-1])
        return timed(name, fn)(*a)
    return wrapper


for name in ("feed", "decode", "compact", "remember", "place"):
    setattr(fast.decoder.StaticDecoder, name, timed(name, getattr(fast.decoder.StaticDecoder, name)))
ragen_mini.measure_thought_mi = kernels("mi", alternated("mi", ragen_mini.measure_thought_mi))
ragen_mini.old_logprobs_and_values = kernels("score", alternated("score", ragen_mini.old_logprobs_and_values))
for name in ("update", "token_logprobs", "token_values", "clipped_step", "collate", "compute_advantages",
             "copy_weights", "play_episodes"):
    setattr(ragen_mini, name, timed("logp" if name == "token_logprobs" else name, getattr(ragen_mini, name)))
for name in ("update", "play_episodes"):
    setattr(ragen_mini, name, kernels(name, getattr(ragen_mini, name)))
# regions for --gaps only (no timers): what else the host does between GPU work
torch.Tensor.backward = labelled("backward", torch.Tensor.backward)
torch.nn.utils.clip_grad_norm_ = labelled("clip_grad_norm", torch.nn.utils.clip_grad_norm_)
for name in ("micro_batches", "crop"):
    setattr(ragen_mini, name, labelled(name, getattr(ragen_mini, name)))
for name in ("actor_loss", "value_loss"):
    setattr(ragen_mini.starpo, name, labelled(name, getattr(ragen_mini.starpo, name)))
for name in ("step_env", "encode_batch", "decode_batch", "read_reply", "next_user_message", "append_reply",
             "left_pad", "start_episodes"):
    setattr(rollout, name, labelled(name, getattr(rollout, name)))
end_of_iteration = launch.end_of_iteration


def end_of_iteration_timed(run, metrics, *a, **k):
    result = end_of_iteration(run, metrics, *a, **k)
    row = {"iteration": metrics["iteration"], **{k: v for k, v in metrics.items() if k.startswith("perf/")},
           **{f"t/{k}": round(v, 4) for k, v in seconds.items()}}
    with open(out_path, "a") as f:
        f.write(json.dumps(row) + "\n")
    seconds.clear()
    state["iteration"] = metrics["iteration"] + 1
    return result


launch.end_of_iteration = end_of_iteration_timed
launch.main([*args, "train.time_limit_min=0", "eval.every=0", "checkpoint.every=0"])
