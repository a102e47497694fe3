# benchmarks/pytorch_gpt_step.py — PyTorch's side of bench_gpt.cpp's cuda:0 rows on a GPU
# machine (pip's torch with CUDA): nanoGPT as bench_gpt_torch.cpp has it (4 layers, 4 heads,
# width 128, vocabulary 65, batch 16, sequence 256, tied head), AdamW(3e-4, betas 0.9/0.95),
# gradient clipping at 1.0; one step per call, f32 and under autocast to bf16, 20 steps after 3
# timed with CUDA events. Usage: python3 benchmarks/pytorch_gpt_step.py
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
V, L, H, C, B, T = 65, 4, 4, 128, 16, 256
class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln_1, s.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        s.c_attn, s.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        s.c_fc, s.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
    def forward(s, x):
        q, k, v = s.c_attn(s.ln_1(x)).split(C, 2)
        hd = lambda t: t.view(B, T, H, C // H).transpose(1, 2)
        y = F.scaled_dot_product_attention(hd(q), hd(k), hd(v), is_causal=True)
        h = x + s.attn_proj(y.transpose(1, 2).reshape(B, T, C))
        return h + s.mlp_proj(F.gelu(s.c_fc(s.ln_2(h))))
class Gpt(nn.Module):
    def __init__(s):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        s.h = nn.ModuleList(Block() for _ in range(L))
        s.ln_f = nn.LayerNorm(C)
    def forward(s, idx):
        x = s.wte(idx) + s.wpe(torch.arange(T, device=idx.device))
        for b in s.h: x = b(x)
        return s.ln_f(x) @ s.wte.weight.t()
m = Gpt().cuda()
opt = torch.optim.AdamW(m.parameters(), lr=3e-4, betas=(0.9, 0.95))
x = torch.randint(0, V, (B, T), device="cuda"); y = torch.randint(0, V, (B, T), device="cuda")
def step(amp):
    opt.zero_grad()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        loss = F.cross_entropy(m(x).reshape(-1, V), y.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step()
    return loss.item()
for amp in (False, True):
    for _ in range(3): step(amp)
    torch.cuda.synchronize()
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20): step(amp)
    e.record(); torch.cuda.synchronize()
    print(f"pytorch gpt step cuda {'autocast bf16' if amp else 'f32'}: {s.elapsed_time(e) / 20:.3f} ms")
