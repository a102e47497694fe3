# benchmarks/pytorch_sdpa.py — PyTorch's side of bench_attention.cpp on a GPU machine (pip's
# torch with CUDA; libtorch in ferry-bench's process has no CUDA build here): SDPA at the same
# shapes, [1, 8, L, 64] for L = 512, 2048, 8192, f32 and f16, forward and forward+backward,
# timed with CUDA events, through each of PyTorch's kernels (flash takes 16-bit only).
# Usage: python3 benchmarks/pytorch_sdpa.py   (docs/gpu-results.md records what it printed)
import torch, time
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
torch.manual_seed(0)
print("torch", torch.__version__, torch.cuda.get_device_name(0))
def bench(fn, reps):
    for _ in range(2): fn()
    torch.cuda.synchronize()
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / reps
for dt in (torch.float32, torch.float16):
    for L in (512, 2048, 8192):
        q, k, v = (torch.randn(1, 8, L, 64, device="cuda", dtype=dt) for _ in range(3))
        for name, backends in (("default", None), ("flash", [SDPBackend.FLASH_ATTENTION]),
                               ("efficient", [SDPBackend.EFFICIENT_ATTENTION]), ("math", [SDPBackend.MATH])):
            def fwd():
                return F.scaled_dot_product_attention(q, k, v)
            qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
            def fb():
                y = F.scaled_dot_product_attention(qg, kg, vg)
                y.backward(torch.ones_like(y))
            try:
                if backends is None:
                    tf, tb = bench(fwd, 20), bench(fb, 10)
                else:
                    with sdpa_kernel(backends):
                        tf, tb = bench(fwd, 20), bench(fb, 10)
                fl = 4.0 * L * L * 64 * 8
                print(f"sdpa {str(dt)[6:]} L{L} {name}: forward {tf:.3f} ms ({fl/tf/1e9:.1f} TFLOP/s), "
                      f"forward+backward {tb:.3f} ms ({3.5*fl/tb/1e9:.1f} TFLOP/s)")
            except Exception as ex:
                print(f"sdpa {str(dt)[6:]} L{L} {name}: not run ({str(ex).splitlines()[0][:100]})")
