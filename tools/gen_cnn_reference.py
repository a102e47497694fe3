#!/usr/bin/python3
"""Generate tests/data/pytorch_cnn_reference.json: PyTorch's results and gradients for the
CNN ops beyond convolution (tests/test_cnn_ops.cpp runs them with ferry's ops on every device
and compares): conv_transpose1d/2d, max/avg/adaptive pooling (with max pooling's indices),
batch_norm, group_norm, instance_norm (with the running statistics they update),
local_response_norm, interpolate and pixel_shuffle/unshuffle.

Regenerate (from the repository root), as tools/gen_conv_reference.py:

    /usr/bin/python3 tools/gen_cnn_reference.py

Format: {"torch_version": str, "cases": [{"name", "op", "attrs", "inputs": [tensor...],
"buffers": [tensor...], "upstream", "output", "indices" (max pools), "buffers_after",
"grads": [tensor...], "tol"}]}, tensors as in pytorch_reference.json. inputs are
differentiable (grads[i] is d/d inputs[i] of sum(output * upstream)); buffers are the
running statistics, passed as given and compared after the call (buffers_after). attrs hold
PyTorch's keyword arguments.
"""

import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_cnn_reference.json")
TOL = {"rtol": 1e-4, "atol": 1e-5}
CASES = []


def call(op, inputs, buffers, attrs):
    """The op as PyTorch runs it: (output, indices or None)."""
    if op in ("max_pool1d", "max_pool2d", "max_pool3d", "adaptive_max_pool1d",
              "adaptive_max_pool2d", "adaptive_max_pool3d"):
        return getattr(F, op)(*inputs, return_indices=True, **attrs)
    if op.startswith("max_unpool"):  # unpooling what max_poolNd gives
        pool_attrs = {k: v for k, v in attrs.items() if k != "output_size"}
        v, i = getattr(F, "max_pool" + op[-2:])(*inputs, return_indices=True, **pool_attrs)
        return getattr(F, op)(v, i, **attrs), None
    if op == "batch_norm":
        x, w, b = (inputs + [None, None])[:3]
        rm, rv = (buffers + [None, None])[:2]
        return F.batch_norm(x, rm, rv, w, b, **attrs), None
    if op == "instance_norm":
        x, w, b = (inputs + [None, None])[:3]
        rm, rv = (buffers + [None, None])[:2]
        return F.instance_norm(x, rm, rv, w, b, **attrs), None
    if op == "group_norm":
        x, w, b = (inputs + [None, None])[:3]
        return F.group_norm(x, attrs["num_groups"], w, b, attrs.get("eps", 1e-5)), None
    return getattr(F, op)(*inputs, **attrs), None


def case(name, op, shapes, attrs, buffers=(), lo=-1.0, hi=1.0, tol=None, decimals=3):
    g = ref.Gen(name)
    inputs = [g.uniform(s, lo, hi, decimals=decimals) for s in shapes]
    bufs = [g.uniform(s, 0.5, 1.5) for s in buffers]
    before = [b.clone() for b in bufs]
    for t in inputs:
        t.requires_grad_(True)
    out, indices = call(op, inputs, bufs, attrs)
    upstream = g.uniform(list(out.shape), -1.0, 1.0)
    grads = torch.autograd.grad((out * upstream).sum(), inputs, allow_unused=True)
    grads = [torch.zeros_like(t) if gr is None else gr for t, gr in zip(inputs, grads)]
    j = lambda ts: ",".join(ref.tensor_json(t) for t in ts)  # noqa: E731
    CASES.append('{"name":%s,"op":%s,"attrs":%s,"inputs":[%s],"buffers":[%s],"upstream":%s,'
                 '"output":%s,%s"buffers_after":[%s],"grads":[%s],"tol":%s}' % (
                     json.dumps(name), json.dumps(op), json.dumps(attrs, sort_keys=True),
                     j(inputs), j(before), ref.tensor_json(upstream),
                     ref.tensor_json(out.detach()),
                     '' if indices is None else '"indices":%s,' % ref.tensor_json(indices),
                     j(bufs), j(grads), json.dumps(tol or TOL)))


def conv_transpose_cases():
    case("conv_transpose1d_basic", "conv_transpose1d", [[2, 3, 5], [3, 4, 3], [4]],
         {"stride": 2, "padding": 1, "output_padding": 1})
    case("conv_transpose1d_groups_dilation", "conv_transpose1d", [[1, 4, 6], [4, 3, 2], [6]],
         {"groups": 2, "dilation": 2})
    case("conv_transpose2d_basic", "conv_transpose2d", [[2, 3, 4, 5], [3, 2, 3, 3], [2]],
         {"stride": 2, "padding": 1, "output_padding": 1})
    case("conv_transpose2d_asym_nobias", "conv_transpose2d", [[1, 2, 3, 4], [2, 3, 2, 3]],
         {"stride": [1, 2], "padding": [0, 1], "dilation": [2, 1]})
    case("conv_transpose2d_depthwise_unbatched", "conv_transpose2d", [[4, 3, 3], [4, 1, 3, 3],
                                                                     [4]],
         {"groups": 4, "stride": 2, "output_padding": [1, 0]})


def pool_cases():
    case("max_pool1d_basic", "max_pool1d", [[2, 3, 9]], {"kernel_size": 3, "stride": 2,
                                                         "padding": 1})
    case("max_pool1d_dilation_ceil", "max_pool1d", [[1, 2, 10]],
         {"kernel_size": 2, "stride": 3, "dilation": 2, "ceil_mode": True})
    case("max_pool2d_resnet_stem", "max_pool2d", [[2, 3, 8, 7]],
         {"kernel_size": 3, "stride": 2, "padding": 1})
    case("max_pool2d_ceil_unbatched", "max_pool2d", [[3, 7, 6]],
         {"kernel_size": [2, 3], "stride": [2, 2], "ceil_mode": True})
    case("max_pool2d_dilation", "max_pool2d", [[1, 2, 9, 9]],
         {"kernel_size": 2, "stride": 1, "dilation": [2, 3], "padding": 1})
    case("avg_pool1d_basic", "avg_pool1d", [[2, 3, 9]], {"kernel_size": 3, "stride": 2,
                                                         "padding": 1})
    case("avg_pool1d_exclude_pad_ceil", "avg_pool1d", [[1, 2, 8]],
         {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
          "count_include_pad": False})
    case("avg_pool2d_basic", "avg_pool2d", [[2, 3, 6, 7]], {"kernel_size": 2})
    case("avg_pool2d_pad_ceil", "avg_pool2d", [[1, 2, 7, 6]],
         {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True})
    case("avg_pool2d_exclude_pad", "avg_pool2d", [[2, 2, 5, 5]],
         {"kernel_size": [3, 2], "stride": [2, 1], "padding": [1, 1],
          "count_include_pad": False})
    case("avg_pool2d_divisor_override_unbatched", "avg_pool2d", [[3, 6, 6]],
         {"kernel_size": 3, "stride": 3, "divisor_override": 4})
    case("adaptive_avg_pool1d_uneven", "adaptive_avg_pool1d", [[2, 3, 10]], {"output_size": 4})
    case("adaptive_avg_pool2d_global", "adaptive_avg_pool2d", [[2, 4, 5, 3]],
         {"output_size": 1})
    case("adaptive_avg_pool2d_uneven", "adaptive_avg_pool2d", [[1, 2, 7, 5]],
         {"output_size": [3, 4]})
    case("adaptive_avg_pool2d_upsampling", "adaptive_avg_pool2d", [[2, 3, 3]],
         {"output_size": [5, 4]})
    case("adaptive_max_pool1d_uneven", "adaptive_max_pool1d", [[2, 2, 11]], {"output_size": 3})
    case("adaptive_max_pool2d_uneven", "adaptive_max_pool2d", [[2, 3, 7, 6]],
         {"output_size": [3, 4]})
    # output sizes that divide the input's: ferry runs these as the pooling kernels
    case("adaptive_avg_pool1d_dividing", "adaptive_avg_pool1d", [[2, 3, 12]], {"output_size": 4})
    case("adaptive_max_pool1d_dividing_unbatched", "adaptive_max_pool1d", [[3, 12]],
         {"output_size": 3})
    case("adaptive_max_pool2d_dividing", "adaptive_max_pool2d", [[2, 3, 8, 6]],
         {"output_size": [4, 3]})
    # The 3-D pools.
    case("max_pool3d_basic", "max_pool3d", [[2, 2, 5, 6, 7]],
         {"kernel_size": 3, "stride": 2, "padding": 1})
    case("max_pool3d_ceil_dilation_unbatched", "max_pool3d", [[2, 7, 6, 5]],
         {"kernel_size": [2, 2, 3], "stride": [2, 1, 2], "dilation": [2, 1, 1],
          "ceil_mode": True})
    # Values in {-1, 0, 1}: every window has ties, and the index is the first maximum in
    # (d, h, w) order, as PyTorch's.
    case("max_pool3d_ties", "max_pool3d", [[1, 2, 4, 5, 6]], {"kernel_size": [2, 3, 2],
                                                              "stride": 1}, decimals=0)
    case("avg_pool3d_basic", "avg_pool3d", [[2, 3, 4, 6, 6]], {"kernel_size": 2})
    case("avg_pool3d_pad_ceil_exclude", "avg_pool3d", [[1, 2, 5, 7, 6]],
         {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
          "count_include_pad": False})
    case("avg_pool3d_pad_ceil_include", "avg_pool3d", [[1, 2, 5, 7, 6]],
         {"kernel_size": [3, 2, 3], "stride": 2, "padding": [1, 1, 0], "ceil_mode": True})
    case("avg_pool3d_divisor_override_unbatched", "avg_pool3d", [[2, 6, 6, 6]],
         {"kernel_size": 3, "stride": 3, "divisor_override": 5})
    case("adaptive_avg_pool3d_uneven", "adaptive_avg_pool3d", [[2, 2, 5, 7, 6]],
         {"output_size": [2, 3, 4]})
    case("adaptive_avg_pool3d_global", "adaptive_avg_pool3d", [[2, 3, 3, 4, 5]],
         {"output_size": 1})
    case("adaptive_max_pool3d_uneven", "adaptive_max_pool3d", [[1, 2, 5, 7, 6]],
         {"output_size": [3, 2, 4]})
    # max_unpool of max_pool's values and indices (overlapping windows: indices repeat).
    case("max_unpool1d_overlapping", "max_unpool1d", [[2, 3, 9]], {"kernel_size": 3, "stride": 2,
                                                                   "padding": 1})
    case("max_unpool2d_output_size", "max_unpool2d", [[2, 2, 7, 6]],
         {"kernel_size": 2, "stride": 2, "output_size": [7, 6]})
    case("max_unpool2d_unbatched", "max_unpool2d", [[3, 6, 7]], {"kernel_size": [2, 3],
                                                                 "stride": [2, 2]})
    case("max_unpool3d_basic", "max_unpool3d", [[1, 2, 4, 6, 5]],
         {"kernel_size": 2, "stride": 2, "output_size": [1, 2, 5, 6, 5]})


def norm_cases():
    case("batch_norm_2d_training", "batch_norm", [[3, 4, 5, 2], [4], [4]],
         {"training": True, "momentum": 0.2, "eps": 1e-5}, buffers=[[4], [4]])
    case("batch_norm_3d_eval", "batch_norm", [[2, 3, 2, 3, 2], [3], [3]],
         {"training": False, "eps": 1e-3}, buffers=[[3], [3]])
    case("batch_norm_no_running_no_affine", "batch_norm", [[4, 2, 3, 3]],
         {"training": True})
    case("group_norm_basic", "group_norm", [[2, 6, 3, 4], [6], [6]],
         {"num_groups": 3, "eps": 1e-5})
    case("group_norm_one_group_1d", "group_norm", [[3, 4, 5]], {"num_groups": 1})
    case("instance_norm_running", "instance_norm", [[2, 3, 4, 5], [3], [3]],
         {"use_input_stats": True, "momentum": 0.3}, buffers=[[3], [3]])
    case("instance_norm_plain_1d", "instance_norm", [[3, 2, 6]], {})
    case("instance_norm_eval_running", "instance_norm", [[2, 2, 3, 3]],
         {"use_input_stats": False}, buffers=[[2], [2]])
    case("local_response_norm_4d", "local_response_norm", [[2, 5, 3, 3]],
         {"size": 3, "alpha": 0.1, "beta": 0.75, "k": 2.0})
    case("local_response_norm_3d_even", "local_response_norm", [[2, 6, 4]],
         {"size": 4, "alpha": 0.5, "beta": 0.5, "k": 1.0})


def resample_cases():
    for mode in ("nearest", "nearest-exact"):
        case(f"interpolate_{mode}_size", "interpolate", [[2, 3, 4, 5]],
             {"size": [7, 3], "mode": mode})
        case(f"interpolate_{mode}_scale", "interpolate", [[1, 2, 5]],
             {"scale_factor": 2.5, "mode": mode})
    case("interpolate_nearest_x2", "interpolate", [[1, 2, 3, 4]],
         {"scale_factor": 2, "mode": "nearest"})
    for align in (False, True):
        a = "align" if align else "noalign"
        case(f"interpolate_linear_{a}", "interpolate", [[2, 2, 5]],
             {"size": 8, "mode": "linear", "align_corners": align})
        case(f"interpolate_bilinear_{a}_up", "interpolate", [[1, 2, 4, 3]],
             {"size": [7, 5], "mode": "bilinear", "align_corners": align})
        case(f"interpolate_bilinear_{a}_down", "interpolate", [[2, 1, 7, 6]],
             {"size": [3, 4], "mode": "bilinear", "align_corners": align})
        case(f"interpolate_bicubic_{a}", "interpolate", [[1, 2, 4, 5]],
             {"size": [6, 8], "mode": "bicubic", "align_corners": align})
        case(f"interpolate_trilinear_{a}", "interpolate", [[1, 1, 3, 2, 4]],
             {"size": [4, 3, 5], "mode": "trilinear", "align_corners": align})
    case("interpolate_nearest_3d", "interpolate", [[1, 2, 3, 2, 4]],
         {"size": [5, 3, 2], "mode": "nearest"})
    case("interpolate_trilinear_scale", "interpolate", [[2, 1, 2, 3, 4]],
         {"scale_factor": 1.5, "mode": "trilinear"})
    case("interpolate_bilinear_scale", "interpolate", [[1, 2, 3, 5]],
         {"scale_factor": [1.5, 0.6], "mode": "bilinear", "align_corners": False})
    case("interpolate_bicubic_scale_recompute", "interpolate", [[1, 1, 5, 4]],
         {"scale_factor": 1.7, "mode": "bicubic", "recompute_scale_factor": True})
    case("interpolate_area", "interpolate", [[2, 2, 7, 5]], {"size": [3, 2], "mode": "area"})
    case("pixel_shuffle_basic", "pixel_shuffle", [[2, 8, 3, 2]], {"upscale_factor": 2})
    case("pixel_unshuffle_basic", "pixel_unshuffle", [[1, 2, 6, 9]], {"downscale_factor": 3})


def main():
    conv_transpose_cases()
    pool_cases()
    norm_cases()
    resample_cases()
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
