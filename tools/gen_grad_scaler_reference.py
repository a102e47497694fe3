#!/usr/bin/python3
"""Generate tests/data/pytorch_grad_scaler_reference.json: PyTorch's GradScaler over training
steps with injected inf and NaN gradients (tests/test_grad_scaler.cpp replays each case with
ferry::GradScaler and compares the scale, the growth tracker, which steps were skipped, the
parameters after every step and the final state_dict).

Regenerate (from the repository root), as tools/gen_cnn_reference.py:

    /usr/bin/python3 tools/gen_grad_scaler_reference.py

Debian's python3-torch (1.13) has GradScaler only for CUDA: the class is
torch.cuda.amp.GradScaler, its scale() and _MultiDeviceReplicator assert CUDA tensors, and its
two kernels, torch._amp_foreach_non_finite_check_and_unscale_ and torch._amp_update_scale_,
have no CPU implementation. This script runs that class on the CPU as it is, with the CUDA
assertions lifted and the two kernels written out below as PyTorch's CUDA kernels define them
(aten/src/ATen/native/cuda/AmpKernels.cu): every gradient is checked for inf/NaN before it is
multiplied by inv_scale; the scale backs off on a found inf (and the growth tracker resets),
and grows by growth_factor after growth_interval clean steps in a row, when the result is
finite. Everything else (the skip decision, the per-optimizer stages, unscale_ before clipping,
state_dict) is PyTorch's own code.

Format: {"torch_version", "cases": [{"name", "options" {init_scale, growth_factor,
backoff_factor, growth_interval}, "optimizer" ("sgd" with lr and momentum, or "adam" with lr),
"params" [tensor...] (initial, f32), "steps": [{"inputs" tensor [B, 4], "inject" [[param,
flat index, "inf"|"nan"]...] (written into the scaled gradient after backward), "clip" (max
norm, or null: unscale_ then clip_grad_norm_ before step), "scale" (after update),
"growth_tracker", "skipped", "params" [tensor...] (after the step)}], "state_dict"}]}.
The model: y = tanh(x W^T + b), loss = mean(y^2) * 4.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)


def non_finite_check_and_unscale_(grads, found_inf, inv_scale):
    for g in grads:
        if not bool(torch.isfinite(g).all()):
            found_inf.fill_(1.0)
        g.mul_(inv_scale)


def update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                  growth_interval):
    if found_inf.item() > 0:
        scale.mul_(backoff_factor)
        growth_tracker.fill_(0)
    else:
        successful = growth_tracker.item() + 1
        if successful == growth_interval:
            grown = scale * growth_factor
            if bool(torch.isfinite(grown).all()):
                scale.copy_(grown)
            growth_tracker.fill_(0)
        else:
            growth_tracker.fill_(successful)
    return scale


torch._amp_foreach_non_finite_check_and_unscale_ = non_finite_check_and_unscale_
torch._amp_update_scale_ = update_scale_
torch.cuda.is_available = lambda: True  # GradScaler disables itself without CUDA
import torch.cuda.amp.grad_scaler as grad_scaler  # noqa: E402


def _replicator_init(self, master_tensor):  # PyTorch's, without the CUDA assertion
    self.master = master_tensor
    self._per_device_tensors = {}


grad_scaler._MultiDeviceReplicator.__init__ = _replicator_init


class CpuGradScaler(grad_scaler.GradScaler):
    def scale(self, outputs):  # PyTorch's single-tensor path, without the CUDA assertion
        if self._scale is None:
            self._lazy_init_scale_growth_tracker(outputs.device)
        return outputs * self._scale.to(device=outputs.device)


OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_grad_scaler_reference.json")
CASES = []


def case(name, options, optimizer, steps):
    g = ref.Gen(name)
    w = torch.nn.Parameter(g.uniform([3, 4], -1.0, 1.0))
    b = torch.nn.Parameter(g.uniform([3], -1.0, 1.0))
    params = [w, b]
    initial = [p.detach().clone() for p in params]
    if optimizer["kind"] == "sgd":
        opt = torch.optim.SGD(params, lr=optimizer["lr"], momentum=optimizer["momentum"])
    else:
        opt = torch.optim.Adam(params, lr=optimizer["lr"])
    scaler = CpuGradScaler(**options)
    out_steps = []
    for inject, clip in steps:
        x = g.uniform([5, 4], -2.0, 2.0)
        opt.zero_grad()
        loss = torch.tanh(x @ w.t() + b).pow(2).mean() * 4
        scaler.scale(loss).backward()
        for p, k, v in inject:
            params[p].grad.view(-1)[k] = float(v)
        before = [p.detach().clone() for p in params]
        if clip is not None:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(params, clip)
        scaler.step(opt)
        scaler.update()
        skipped = all(torch.equal(a, p.detach()) for a, p in zip(before, params))
        out_steps.append('{"inputs": %s, "inject": %s, "clip": %s, "scale": %s, '
                         '"growth_tracker": %d, "skipped": %s, "params": [%s]}' % (
                             ref.tensor_json(x), json.dumps(inject), json.dumps(clip),
                             json.dumps(scaler.get_scale()), scaler._get_growth_tracker(),
                             json.dumps(skipped),
                             ", ".join(ref.tensor_json(p.detach()) for p in params)))
    CASES.append('{"name": %s, "options": %s, "optimizer": %s, "params": [%s], "steps": [\n%s\n],'
                 ' "state_dict": %s}' % (
                     json.dumps(name), json.dumps(options), json.dumps(optimizer),
                     ", ".join(ref.tensor_json(p) for p in initial), ",\n".join(out_steps),
                     json.dumps(scaler.state_dict())))


def main():
    growth = {"init_scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5,
              "growth_interval": 3}
    case("sgd_momentum_inf_then_nan", growth, {"kind": "sgd", "lr": 0.1, "momentum": 0.9},
         [([], None), ([], None), ([[0, 5, "inf"]], None), ([], None), ([], None), ([], None),
          ([[1, 2, "nan"]], None), ([], None), ([], None), ([], None)])
    case("adam_unscale_and_clip", {"init_scale": 256.0, "growth_factor": 4.0,
                                   "backoff_factor": 0.25, "growth_interval": 2},
         {"kind": "adam", "lr": 0.05},
         [([], 0.5), ([], 0.5), ([[0, 0, "-inf"]], 0.5), ([], None), ([], 0.5),
          ([[0, 1, "nan"], [1, 0, "inf"]], None), ([], 0.5), ([], None)])
    case("overflowing_growth_is_refused", {"init_scale": 2.0 ** 127, "growth_factor": 2.0 ** 10,
                                           "backoff_factor": 0.5, "growth_interval": 1},
         {"kind": "sgd", "lr": 0.01, "momentum": 0.0},
         [([], None), ([], None), ([[1, 1, "inf"]], None), ([], None)])
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
