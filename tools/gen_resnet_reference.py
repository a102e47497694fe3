#!/usr/bin/python3
"""Write tests/data/resnet_tiny.safetensors and tests/data/resnet_tiny.json: a small
torchvision-style ResNet's state_dict (BasicBlock, one block per stage, widths 4/8/8/16, the
ImageNet stem: 7x7 stride-2 conv1, bn1, 3x3 stride-2 max pool; 5 classes) after three
training-mode forward passes (so the BatchNorm running statistics and num_batches_tracked
are not their initial values), and its outputs on a fixed input: in eval mode, and in
training mode with the gradient of the summed logits for conv1.weight and fc.weight.
tests/test_cnn_modules.cpp loads the checkpoint by name into samples/resnet.hpp's ResNet
and compares.

The network is written out below with torchvision's module names (conv1, bn1,
layer1.0.conv1, layer2.0.downsample.0, fc, ...): torchvision is not in Debian.

    /usr/bin/python3 tools/gen_resnet_reference.py
"""

import json
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402
import safetensors_write  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    def __init__(self, widths, blocks, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = widths[0]
        for s, (w, n) in enumerate(zip(widths, blocks)):
            stage = []
            for b in range(n):
                stage.append(BasicBlock(cin, w, 2 if b == 0 and s > 0 else 1))
                cin = w
            setattr(self, f"layer{s + 1}", nn.Sequential(*stage))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, classes)
        self.stages = len(widths)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for s in range(self.stages):
            x = getattr(self, f"layer{s + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def main():
    torch.manual_seed(0)
    model = ResNet([4, 8, 8, 16], [1, 1, 1, 1], 5)
    g = ref.Gen("resnet_tiny")
    model.train()
    with torch.no_grad():
        for i in range(3):
            model(g.uniform([2, 3, 32, 32], -1.0, 1.0))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x = g.uniform([2, 3, 32, 32], -1.0, 1.0)
    model.eval()
    with torch.no_grad():
        eval_out = model(x)
    model.train()
    train_out = model(x)
    train_out.sum().backward()
    safetensors_write.write(os.path.join(DATA, "resnet_tiny.safetensors"),
                            safetensors_write.torch_tensors(state))
    doc = ('{"torch_version":%s,"input":%s,"eval_output":%s,"train_output":%s,'
           '"conv1_weight_grad":%s,"fc_weight_grad":%s,"tol":{"rtol":1e-4,"atol":1e-5}}\n' % (
               json.dumps(torch.__version__), ref.tensor_json(x), ref.tensor_json(eval_out),
               ref.tensor_json(train_out.detach()), ref.tensor_json(model.conv1.weight.grad),
               ref.tensor_json(model.fc.weight.grad)))
    json.loads(doc)
    with open(os.path.join(DATA, "resnet_tiny.json"), "w") as f:
        f.write(doc)
    print(f"wrote {len(state)} tensors -> tests/data/resnet_tiny.safetensors and "
          "tests/data/resnet_tiny.json")


if __name__ == "__main__":
    sys.exit(main())
