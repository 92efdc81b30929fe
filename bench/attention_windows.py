"""A decoding step's attention alone, in the SmolLM2 preset's shape (256 rows, 9 query heads sharing 3 key/value
heads of 64, bf16, a padding mask), per window: PyTorch's fused attention as the static decoder calls it,
replayed from a CUDA graph as the decoder replays it, against the time to read the window's keys and values
once at 4.3 TB/s (the H200's copy rate here); then, not graphed, the other ways of computing it, with their
error against the first.

    python bench/attention_windows.py
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, H, G, d, SLOTS = 256, 9, 3, 64, 2049
BANDWIDTH = 4.3e12  # bytes per second


def microseconds(function, repeats=50):
    """Microseconds per call of `function` (a graph's replay, from graphed(), or a plain call), after 5 calls."""
    for _ in range(5):
        function()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeats):
        function()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats * 1000


def graphed(function):
    """`function` captured in a CUDA graph, as the decoder runs its steps -> the graph's replay."""
    function()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        function()
    return graph.replay


def main():
    torch.manual_seed(0)
    keys, values = (torch.randn(B, G, SLOTS, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    q = torch.randn(B, H, 1, d, device="cuda", dtype=torch.bfloat16)
    for window in (256, 512, 1024, 1536, 2048):
        mask = torch.rand(B, window, device="cuda") > 0.2
        mask[:, -1] = True
        visible = mask[:, None, None, :]  # (B, 1, 1, window)
        k, v = keys[:, :, :window], values[:, :, :window]

        def fused():  # PyTorch picks the kernel (cuDNN's on an H200), as in the decoder
            return F.scaled_dot_product_attention(q, k, v, attn_mask=visible, scale=0.125, enable_gqa=True)

        def math():
            with sdpa_kernel([SDPBackend.MATH]):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=visible, scale=0.125, enable_gqa=True)

        def copied():  # K and V copied for every query head
            return F.scaled_dot_product_attention(q, k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1),
                                                  attn_mask=visible, scale=0.125)

        def grouped():  # the query heads of one K/V head as the rows of one product
            scores = q.view(B, G, H // G, d) @ k.transpose(-1, -2) * 0.125  # (B, G, H/G, window)
            weights = scores.float().masked_fill(~visible, float("-inf")).softmax(-1).to(v.dtype)
            return (weights @ v).view(B, H, 1, d)

        reference = fused().float()
        floor = B * G * window * d * 2 * 2 / BANDWIDTH * 1e6
        row = [f"window {window}: read once {floor:.1f} us, fused graphed {microseconds(graphed(fused)):.1f} us"]
        for name, function in (("fused", fused), ("math", math), ("copied K/V", copied),
                               ("grouped products", grouped)):
            error = ((function().float() - reference).norm() / reference.norm()).item()
            row.append(f"{name} {microseconds(function):.1f} us (error {error:.1e})")
        print("; ".join(row), flush=True)


if __name__ == "__main__":
    main()
