#!/usr/bin/python3
"""Generate tests/data/pytorch_rnn_reference.json: PyTorch's nn.RNN, nn.LSTM, nn.GRU and their
cells over padded, unbatched and packed sequences (tests/test_rnn.cpp builds ferry's with the same
options, loads each case's state_dict and compares the outputs, the final states and the
gradients of the input, the starting states and every parameter).

Regenerate (from the repository root), as tools/gen_cnn_reference.py:

    /usr/bin/python3 tools/gen_rnn_reference.py

Format: {"torch_version", "cases": [{"name", "module" ("RNN", "LSTM", "GRU", "RNNCell",
"LSTMCell", "GRUCell"), "input_size", "hidden_size", "config" (the constructor's keyword
arguments), "state" {name: tensor}, "x", "h0" and "c0" (absent: not given), "packed" (absent:
padded input; else {"lengths", "enforce_sorted"}: x is packed with pack_padded_sequence and
the output compared after pad_packed_sequence), "outputs" [output, h_n, c_n (LSTM)] (cells:
[h', c' (LSTMCell)]), "upstream" [one per output], "grads" {"x", "h0", "c0"}, "param_grads"
{name: tensor}, "tol"}], tensors as in pytorch_reference.json. Modules run in eval mode, so
dropout between layers is off.
"""

import json
import os
import sys

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_rnn_reference.json")
TOL = {"rtol": 1e-4, "atol": 2e-5}
CASES = []
IN, HID = 5, 6


def case(name, module, config, x_shape, h0=None, c0=None, packed=None):
    g = ref.Gen(name)
    torch.manual_seed(len(CASES) + 1)
    m = getattr(nn, module)(IN, HID, **config)
    m.eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(g.uniform(list(p.shape), -0.5, 0.5))
    x = g.uniform(x_shape, -1.0, 1.0).requires_grad_(True)
    states = {}
    for key, shape in (("h0", h0), ("c0", c0)):
        if shape is not None:
            states[key] = g.uniform(shape, -1.0, 1.0).requires_grad_(True)
    cell = module.endswith("Cell")
    if cell:
        if module == "LSTMCell":
            outs = m(x, (states["h0"], states["c0"]) if states else None)
        else:
            outs = (m(x, states.get("h0")),)
    else:
        hx = states.get("h0")
        if module == "LSTM" and states:
            hx = (states["h0"], states["c0"])
        inp = x
        if packed is not None:
            inp = pack_padded_sequence(x, torch.tensor(packed["lengths"]),
                                       batch_first=config.get("batch_first", False),
                                       enforce_sorted=packed["enforce_sorted"])
        out, hn = m(inp, hx)
        if packed is not None:
            out, _ = pad_packed_sequence(out, batch_first=config.get("batch_first", False))
        outs = (out,) + (hn if module == "LSTM" else (hn,))
    upstream = [g.uniform(list(o.shape), -1.0, 1.0) for o in outs]
    torch.autograd.backward(list(outs), upstream)
    j = ref.tensor_json
    state = "{" + ",".join('%s:%s' % (json.dumps(k), j(v)) for k, v in m.state_dict().items()) + "}"
    pgrads = "{" + ",".join('%s:%s' % (json.dumps(k), j(p.grad))
                            for k, p in m.named_parameters()) + "}"
    grads = {"x": x.grad}
    grads.update({k: t.grad for k, t in states.items()})
    given = "".join('"%s":%s,' % (k, j(t.detach())) for k, t in states.items())
    CASES.append(
        '{"name":%s,"module":%s,"input_size":%d,"hidden_size":%d,"config":%s,"state":%s,'
        '"x":%s,%s%s"outputs":[%s],"upstream":[%s],"grads":{%s},"param_grads":%s,"tol":%s}'
        % (json.dumps(name), json.dumps(module), IN, HID, json.dumps(config), state,
           j(x.detach()), given, '' if packed is None else '"packed":%s,' % json.dumps(packed),
           ",".join(j(o.detach()) for o in outs), ",".join(j(u) for u in upstream),
           ",".join('"%s":%s' % (k, j(t)) for k, t in grads.items()), pgrads, json.dumps(TOL)))


def main():
    case("rnn_tanh_two_layers_h0", "RNN", {"num_layers": 2}, [4, 3, IN], h0=[2, 3, HID])
    case("rnn_relu_bidirectional_batch_first", "RNN",
         {"nonlinearity": "relu", "bidirectional": True, "batch_first": True}, [3, 4, IN])
    case("rnn_unbatched_no_bias", "RNN", {"bias": False}, [4, IN], h0=[1, HID])
    case("lstm_h0_c0", "LSTM", {}, [4, 3, IN], h0=[1, 3, HID], c0=[1, 3, HID])
    case("lstm_two_layers_bidirectional_proj", "LSTM",
         {"num_layers": 2, "bidirectional": True, "proj_size": 3}, [4, 3, IN],
         h0=[4, 3, 3], c0=[4, 3, HID])
    case("lstm_unbatched_no_bias", "LSTM", {"bias": False}, [5, IN], h0=[1, HID], c0=[1, HID])
    case("gru_two_layers_bidirectional_batch_first_h0", "GRU",
         {"num_layers": 2, "bidirectional": True, "batch_first": True}, [3, 4, IN],
         h0=[4, 3, HID])
    case("gru_unbatched", "GRU", {}, [3, IN])
    # Packed sequences: unsorted lengths (sorted_indices), both directions and two layers, the
    # state given in the batch's own order; sorted lengths with batch_first and ties.
    case("lstm_packed_unsorted_bidirectional", "LSTM",
         {"num_layers": 2, "bidirectional": True}, [5, 4, IN], h0=[4, 4, HID], c0=[4, 4, HID],
         packed={"lengths": [3, 5, 1, 4], "enforce_sorted": False})
    case("gru_packed_sorted_batch_first", "GRU", {"batch_first": True, "bidirectional": True},
         [4, 4, IN], h0=[2, 4, HID], packed={"lengths": [4, 3, 3, 1], "enforce_sorted": True})
    case("rnn_packed_unsorted_proj_free", "RNN", {"num_layers": 2}, [4, 3, IN],
         packed={"lengths": [2, 4, 2], "enforce_sorted": False})
    case("lstm_packed_proj_unsorted", "LSTM", {"proj_size": 2, "bidirectional": True},
         [3, 3, IN], packed={"lengths": [1, 3, 2], "enforce_sorted": False})
    # The cells.
    case("rnn_cell_relu", "RNNCell", {"nonlinearity": "relu"}, [3, IN], h0=[3, HID])
    case("rnn_cell_tanh_zero_state", "RNNCell", {}, [3, IN])
    case("lstm_cell", "LSTMCell", {}, [3, IN], h0=[3, HID], c0=[3, HID])
    case("lstm_cell_unbatched_zero_state", "LSTMCell", {}, [IN])
    case("gru_cell_no_bias", "GRUCell", {"bias": False}, [3, IN], h0=[3, HID])
    case("gru_cell_unbatched", "GRUCell", {}, [IN], h0=[HID])
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
