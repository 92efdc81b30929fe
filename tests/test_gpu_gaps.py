"""bench/gpu_gaps.py charges the GPU's idle time to what the host was doing, on a hand-built trace whose waits
are worked out by hand."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import gpu_gaps  # noqa: E402


def x(cat, name, ts, dur, correlation=None, tid=1):
    event = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}
    if correlation is not None:
        event["args"] = {"correlation": correlation}
    return event


def kernel(name, ts, dur, correlation):
    return {**x("kernel", name, ts, dur, correlation, tid=7), "pid": 0}


TRACE = [
    x("user_annotation", "update", 0, 100),
    x("user_annotation", "backward", 15, 20),     # nested in update
    x("cpu_op", "aten::mm", 20, 5),
    x("cuda_runtime", "cudaLaunchKernel", 0, 1, correlation=1),
    kernel("A", 0, 10, 1),                          # busy 0-10
    x("cuda_runtime", "cudaLaunchKernel", 22, 1, correlation=2),
    kernel("B", 25, 5, 2),                          # idle 10-25 (15): launched at 22, in backward / aten::mm
    x("cuda_driver", "cuLaunchKernelEx", 23, 1, correlation=3),
    kernel("C", 28, 10, 3),                         # overlaps B: busy to 38, no wait
    x("cuda_runtime", "cudaLaunchKernel", 30, 1, correlation=4),
    kernel("D", 50, 5, 4),                          # idle 38-50 (12): launched at 30, before the wait began
    x("cuda_runtime", "cudaLaunchKernel", 60, 1, correlation=5),
    kernel("E", 70, 5, 5),                          # idle 55-70 (15): launched at 60, in update, no op open
]                                                   # idle 75-100 (25): after the last GPU work


def test_each_wait_goes_to_the_region_open_when_its_work_was_launched():
    found = gpu_gaps.gaps(TRACE)
    assert (found["window"], found["busy"], found["idle"]) == (100, 10 + 5 + 8 + 5 + 5, 67)
    assert found["by_label"] == {"backward": [15, 1], gpu_gaps.BEFORE: [12, 1], "update": [15, 1],
                                 gpu_gaps.AFTER: [25, 1]}
    assert found["by_op"][("backward", "aten::mm")] == [15, 1] and found["by_op"][("update", "")] == [15, 1]


def test_a_wait_with_no_region_open_and_the_table():
    trace = [x("cpu_op", "aten::add", 0, 4), x("cuda_runtime", "cudaLaunchKernel", 2, 1, correlation=1),
             kernel("A", 6, 4, 1)]  # idle 0-6, launched at 2 inside aten::add only
    found = gpu_gaps.gaps(trace)
    assert found["by_label"] == {gpu_gaps.NONE: [6, 1]} and found["by_op"] == {(gpu_gaps.NONE, "aten::add"): [6, 1]}
    scaled = [{**e, "ts": e["ts"] * 10_000, "dur": e["dur"] * 10_000} for e in TRACE]  # 100 us -> 1 s
    text = gpu_gaps.table(gpu_gaps.gaps(scaled)).splitlines()
    assert text[0] == "window 1.000 s: GPU busy 0.330 s, idle 0.670 s"
    assert text[4:8] == ["| after the last GPU work | 0.250 | 1 |", "| backward | 0.150 | 1 |",
                         "| update | 0.150 | 1 |", f"| {gpu_gaps.BEFORE} | 0.120 | 1 |"]  # the largest first
