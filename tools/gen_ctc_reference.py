#!/usr/bin/python3
"""Generate tests/data/pytorch_ctc_reference.json: PyTorch's F.ctc_loss on log_softmax(logits)
(tests/test_ctc_loss.cpp computes ferry's the same way and compares the loss and the logits'
gradient; the gradient with respect to log_probs itself differs by design, see Note [CTC as a
composition] in runtime/nn/loss_ctc.cpp).

Regenerate (from the repository root), as tools/gen_cnn_reference.py:

    /usr/bin/python3 tools/gen_ctc_reference.py

Format: {"torch_version", "cases": [{"name", "logits" (tensor [T, N, C] or [T, C]), "targets"
(i64 tensor, padded [N, S] or concatenated), "input_lengths", "target_lengths", "blank",
"reduction", "zero_infinity", "upstream" (the loss's gradient), "loss", "grad" (of the logits),
"tol"}], tensors as in pytorch_reference.json.
"""

import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_ctc_reference.json")
TOL = {"rtol": 1e-4, "atol": 1e-5}
CASES = []


def case(name, shape, targets, input_lengths, target_lengths, blank=0, reduction="mean",
         zero_infinity=False):
    g = ref.Gen(name)
    logits = g.uniform(shape, -2.0, 2.0).requires_grad_(True)
    lp = F.log_softmax(logits, dim=-1)
    tgt = torch.tensor(targets, dtype=torch.int64)
    loss = F.ctc_loss(lp, tgt, torch.tensor(input_lengths), torch.tensor(target_lengths),
                      blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    upstream = g.uniform(list(loss.shape), 0.5, 1.5)
    loss.backward(upstream)
    j = ref.tensor_json
    CASES.append(
        '{"name":%s,"logits":%s,"targets":%s,"input_lengths":%s,"target_lengths":%s,"blank":%d,'
        '"reduction":%s,"zero_infinity":%s,"upstream":%s,"loss":%s,"grad":%s,"tol":%s}'
        % (json.dumps(name), j(logits.detach()), j(tgt), json.dumps(input_lengths),
           json.dumps(target_lengths), blank, json.dumps(reduction),
           json.dumps(zero_infinity), j(upstream), j(loss.detach()), j(logits.grad),
           json.dumps(TOL)))


def main():
    # Padded targets, repeated labels (1, 1 needs a blank between), lengths below the maximum.
    case("padded_mean_repeats", [12, 3, 5], [[1, 1, 2, 3], [4, 2, 0, 0], [3, 0, 0, 0]],
         [12, 10, 7], [4, 2, 1])
    case("concatenated_sum", [9, 2, 4], [1, 2, 2, 3, 1], [9, 8], [3, 2], reduction="sum")
    case("none_blank_last", [8, 3, 6], [[0, 1, 2], [4, 4, 4], [2, 0, 0]], [8, 8, 5],
         [3, 3, 1], blank=5, reduction="none")
    # Sample 1 needs 5 frames for 1, 1, 1 (two blanks between) and has 4: infinite, zeroed.
    case("zero_infinity_unreachable", [6, 2, 3], [[1, 2, 1], [1, 1, 1]], [6, 4], [3, 3],
         zero_infinity=True, reduction="none")
    case("empty_target_and_long_input", [30, 2, 4], [[1, 3, 2, 1, 3], [0, 0, 0, 0, 0]],
         [30, 17], [5, 0])
    case("unbatched", [7, 4], [1, 2, 1], [7], [3], reduction="none")
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
