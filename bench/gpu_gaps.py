"""Where the GPU waits for the host: a torch.profiler trace's idle time on the GPU, charged to what the host was
doing when it launched the work that ended each wait.

    python bench/gpu_gaps.py TRACE.json [--top 25]     # a trace of profiler.export_chrome_trace
    (bench/profile_iteration.py --gaps N writes one per phase of iteration N, with this table beside it)

The GPU is busy while any kernel, copy or memset runs (on any stream); between two busy spans it is idle. Each
idle span ends when the next piece of GPU work starts; that work was launched on the host at some time L (its
launch call: the runtime or driver event with the same correlation id). Launched after the idle span began, the
host was the bottleneck: the span is charged to the innermost labelled region (record_function, a
"user_annotation") open on the launching thread at L, and to the innermost operator (aten op) open there.
Launched before the span began, the GPU waited on something else (a dependency between streams, a copy from the
host), and the span is charged to "launched before the wait". The wait before the first piece of work is
charged the same way; the time after the last one to "after the last GPU work".

Worked example (microseconds): kernel A runs 0-10 and kernel B 25-30; B was launched at 22 inside region
"backward" and op "aten::mm". The GPU's busy time is 15 of a 30 us window, and its 15 us idle (10-25) go to
"backward" / "aten::mm".
"""
import argparse
import bisect
import json
from collections import defaultdict

DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH = {"cuda_runtime", "cuda_driver"}
BEFORE, AFTER, NONE = "launched before the wait", "after the last GPU work", "(no labelled region)"


class Innermost:
    """The innermost interval of a kind open at a time, per thread: of those containing it, the one that
    started last (intervals of one thread nest)."""

    def __init__(self, events):
        self.by_thread = defaultdict(list)
        for e in sorted(events, key=lambda e: e["ts"]):
            self.by_thread[(e.get("pid"), e.get("tid"))].append(e)
        self.starts = {key: [e["ts"] for e in found] for key, found in self.by_thread.items()}

    def at(self, thread, time):
        found, starts = self.by_thread.get(thread, []), self.starts.get(thread, [])
        for k in range(bisect.bisect_right(starts, time) - 1, -1, -1):
            if found[k]["ts"] + found[k].get("dur", 0) >= time:
                return found[k]["name"]
        return None


def gaps(events):
    """-> {"window", "busy", "idle": microseconds, "by_label": {label: [us, spans]}, "by_op": {(label, op):
    [us, spans]}} of a trace's events (chrome trace "X" events: name, cat, ts, dur, pid, tid, args)."""
    device = sorted((e for e in events if e.get("cat") in DEVICE), key=lambda e: e["ts"])
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in LAUNCH and "correlation" in e.get("args", {})}
    timed = [e for e in events if e.get("ph") == "X" and "ts" in e]
    labels = Innermost([e for e in events if e.get("cat") == "user_annotation"])
    ops = Innermost([e for e in events if e.get("cat") == "cpu_op"])
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + e.get("dur", 0) for e in timed)
    by_label, by_op = defaultdict(lambda: [0.0, 0]), defaultdict(lambda: [0.0, 0])
    busy, idle_since = 0.0, start

    def charge(key_label, key_op, span):
        if span > 0:
            by_label[key_label][0] += span
            by_label[key_label][1] += 1
            by_op[(key_label, key_op)][0] += span
            by_op[(key_label, key_op)][1] += 1

    for e in device:
        e_end = e["ts"] + e.get("dur", 0)
        if e["ts"] > idle_since:  # the GPU sat idle from idle_since until this work began
            launch = launches.get(e.get("args", {}).get("correlation"))
            if launch is None or launch["ts"] < idle_since:
                charge(BEFORE, "", e["ts"] - idle_since)
            else:
                thread = (launch.get("pid"), launch.get("tid"))
                charge(labels.at(thread, launch["ts"]) or NONE, ops.at(thread, launch["ts"]) or "",
                       e["ts"] - idle_since)
            busy += e_end - e["ts"]
        else:
            busy += max(0.0, e_end - idle_since)
        idle_since = max(idle_since, e_end)
    charge(AFTER, "", end - idle_since)
    return {"window": end - start, "busy": busy, "idle": end - start - busy,
            "by_label": dict(by_label), "by_op": dict(by_op)}


def table(found, top=25):
    """The gaps as text: the window, busy and idle seconds, then idle time by label and by (label, op)."""
    lines = [f"window {found['window'] / 1e6:.3f} s: GPU busy {found['busy'] / 1e6:.3f} s, "
             f"idle {found['idle'] / 1e6:.3f} s", "", "| idle, charged to the region open at the launch | s | waits |",
             "| --- | --- | --- |"]
    lines += [f"| {label} | {us / 1e6:.3f} | {n} |" for label, (us, n) in
              sorted(found["by_label"].items(), key=lambda kv: -kv[1][0])[:top]]
    lines += ["", "| region | operator that launched the work | s | waits |", "| --- | --- | --- | --- |"]
    lines += [f"| {label} | {op} | {us / 1e6:.3f} | {n} |" for (label, op), (us, n) in
              sorted(found["by_op"].items(), key=lambda kv: -kv[1][0])[:top]]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", help="a chrome trace JSON written by torch.profiler's export_chrome_trace")
    parser.add_argument("--top", type=int, default=25, help="rows of each table (default 25)")
    args = parser.parse_args(argv)
    with open(args.trace) as f:
        trace = json.load(f)
    print(table(gaps(trace["traceEvents"] if isinstance(trace, dict) else trace), args.top))


if __name__ == "__main__":
    main()
