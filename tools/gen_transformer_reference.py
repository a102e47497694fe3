#!/usr/bin/python3
"""Generate tests/data/pytorch_transformer_reference.json: PyTorch's nn.MultiheadAttention,
nn.TransformerEncoderLayer and nn.TransformerDecoderLayer (tests/test_transformer.cpp builds
ferry's with the same options, loads each case's state_dict and compares outputs, attention
weights and the gradients of the inputs and of every parameter).

Regenerate (from the repository root), as tools/gen_cnn_reference.py:

    /usr/bin/python3 tools/gen_transformer_reference.py

Format: {"torch_version", "cases": [{"name", "module" ("mha", "encoder", "decoder", "transformer"),
"config" (the constructor's and forward's keyword arguments), "state" {name: tensor},
"inputs" [tensor...] (query, key, value; src; tgt, memory), "masks" {name: tensor} (bool masks
as {"shape", "dtype": "bool", "data": 0/1}), "upstream", "output", "weights" (mha with
need_weights), "grads" [tensor...] (of the inputs), "param_grads" {name: tensor}, "tol"}],
tensors as in pytorch_reference.json. Modules run in eval mode (dropout off) with inputs that
require grad, so PyTorch takes its composed path, not the inference fast path.
"""

import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_transformer_reference.json")
TOL = {"rtol": 1e-4, "atol": 2e-5}
CASES = []
E, H = 8, 2


def bool_json(t):
    return '{"shape":%s,"dtype":"bool","data":%s}' % (
        json.dumps(list(t.shape)), json.dumps([int(x) for x in t.reshape(-1).tolist()]))


def mask_json(masks):
    parts = []
    for k, t in masks.items():
        parts.append('%s:%s' % (json.dumps(k), bool_json(t) if t.dtype == torch.bool
                                else ref.tensor_json(t)))
    return "{" + ",".join(parts) + "}"


def case(name, module, config, shapes, masks):
    g = ref.Gen(name)
    torch.manual_seed(len(CASES) + 1)
    kw = {k: v for k, v in config.items() if k not in ("need_weights", "average_attn_weights")}
    if module == "mha":
        m = nn.MultiheadAttention(E, H, **kw)
    elif module == "encoder":
        m = nn.TransformerEncoderLayer(E, H, **kw)
    elif module == "transformer":
        m = nn.Transformer(E, H, **kw)
    else:
        m = nn.TransformerDecoderLayer(E, H, **kw)
    m.eval()
    # Biases start at zero in PyTorch; random ones test that they are used.
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(g.uniform(list(p.shape), -0.5, 0.5))
    inputs = [g.uniform(s, -1.0, 1.0).requires_grad_(True) for s in shapes]
    weights = None
    if module == "mha":
        out, weights = m(*inputs, need_weights=config["need_weights"],
                         average_attn_weights=config.get("average_attn_weights", True), **masks)
    elif module == "encoder":
        out = m(inputs[0], **masks)
    elif module == "transformer":
        out = m(inputs[0], inputs[1], **masks)
    else:
        out = m(inputs[0], inputs[1], **masks)
    upstream = g.uniform(list(out.shape), -1.0, 1.0)
    out.backward(upstream)
    j = lambda ts: ",".join(ref.tensor_json(t) for t in ts)  # noqa: E731
    state = "{" + ",".join('%s:%s' % (json.dumps(k), ref.tensor_json(v))
                           for k, v in m.state_dict().items()) + "}"
    pgrads = "{" + ",".join('%s:%s' % (json.dumps(k), ref.tensor_json(p.grad))
                            for k, p in m.named_parameters()) + "}"
    CASES.append('{"name":%s,"module":%s,"config":%s,"state":%s,"inputs":[%s],"masks":%s,'
                 '"upstream":%s,"output":%s,%s"grads":[%s],"param_grads":%s,"tol":%s}'
                 % (json.dumps(name), json.dumps(module), json.dumps(config), state, j(inputs),
                    mask_json(masks), ref.tensor_json(upstream), ref.tensor_json(out.detach()),
                    '' if weights is None else '"weights":%s,' % ref.tensor_json(weights.detach()),
                    j([t.grad for t in inputs]), pgrads, json.dumps(TOL)))


def causal(n):
    return torch.triu(torch.full((n, n), float("-inf")), diagonal=1)


def main():
    padding = torch.tensor([[False] * 5 + [True], [False] * 3 + [True] * 3])
    case("mha_batch_first_key_padding_weights", "mha",
         {"batch_first": True, "need_weights": True}, [[2, 5, E], [2, 6, E], [2, 6, E]],
         {"key_padding_mask": padding})
    case("mha_seq_first_float_mask_no_weights", "mha", {"need_weights": False},
         [[5, 2, E], [6, 2, E], [6, 2, E]],
         {"attn_mask": ref.Gen("mha_mask").uniform([5, 6], -1.0, 1.0)})
    case("mha_unbatched_bool_mask_per_head_weights", "mha",
         {"need_weights": True, "average_attn_weights": False}, [[5, E], [6, E], [6, E]],
         {"attn_mask": torch.tensor([[False, True, False, False, True, False]] * 5)})
    case("mha_no_bias_per_head_mask", "mha", {"bias": False, "need_weights": False},
         [[4, 2, E], [4, 2, E], [4, 2, E]],
         {"attn_mask": ref.Gen("mha_head_mask").uniform([2 * H, 4, 4], -1.0, 1.0)})
    case("encoder_post_norm_relu", "encoder", {"dim_feedforward": 16, "dropout": 0.0},
         [[5, 2, E]], {"src_key_padding_mask": torch.tensor([[False] * 4 + [True]] * 2)})
    case("encoder_pre_norm_gelu_batch_first_causal", "encoder",
         {"dim_feedforward": 16, "dropout": 0.0, "activation": "gelu", "batch_first": True,
          "norm_first": True, "layer_norm_eps": 1e-6}, [[2, 5, E]], {"src_mask": causal(5)})
    case("decoder_post_norm", "decoder", {"dim_feedforward": 12, "dropout": 0.0},
         [[4, 2, E], [6, 2, E]],
         {"tgt_mask": causal(4), "memory_key_padding_mask": padding})
    case("decoder_pre_norm_batch_first", "decoder",
         {"dim_feedforward": 12, "dropout": 0.0, "batch_first": True, "norm_first": True,
          "activation": "gelu"}, [[2, 4, E], [2, 6, E]], {"tgt_mask": causal(4)})
    # The whole nn.Transformer: encoder and decoder stacks with their final norms.
    case("transformer_post_norm", "transformer",
         {"num_encoder_layers": 2, "num_decoder_layers": 1, "dim_feedforward": 12,
          "dropout": 0.0}, [[6, 2, E], [4, 2, E]],
         {"src_key_padding_mask": padding, "tgt_mask": causal(4),
          "memory_key_padding_mask": padding})
    case("transformer_pre_norm_gelu_batch_first", "transformer",
         {"num_encoder_layers": 1, "num_decoder_layers": 2, "dim_feedforward": 12,
          "dropout": 0.0, "activation": "gelu", "batch_first": True, "norm_first": True},
         [[2, 5, E], [2, 3, E]], {"tgt_mask": causal(3), "src_mask": causal(5)})
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
