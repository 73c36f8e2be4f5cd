#!/usr/bin/python3
"""The bench models (seeded PyTorch modules exported to ONNX, opset 13), larger than the
examples so that kernel time, not overhead, is what `make bench` measures. The first three
are the ones issue 4 names:

    resnet/       a ResNet-style CNN, [1,3,224,224] -> [1,1000]
    transformer/  6 pre-norm encoder layers (d 256, 4 heads, seq 256; LayerNorm exported
                  as primitive ops), [1,256,256] -> [1,256,256]
    superres256/  a conv super-resolution net (ESPCN-style, x3 by DepthToSpace),
                  [1,1,256,256] -> [1,1,768,768]
    mlp/          4 Linear 1024x1024 + GELU, [64,1024] -> [64,1024] (GEMM-bound)

Each folder gets model.onnx and inputs/<input>.npy. Usage: make_bench_models.py OUT_DIR
(needs Debian's /usr/bin/python3 with torch, onnx, numpy)."""
import io
import os
import shutil
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn


def export(model, x, in_name, out_name, folder, opset=13, external_data=False):
    """Exports `model` (eval mode) on input `x` to folder/model.onnx and saves the inputs as
    folder/inputs/<name>.npy. `x` and `in_name` may be tuples (several inputs), `out_name` a
    list. With `external_data`, the weights go to folder/model.onnx.data (ONNX external
    data). Everything is written into a temporary folder first and moved into place, the
    model last, so an interrupted export leaves no half-written model."""
    xs = x if isinstance(x, tuple) else (x,)
    ins = list(in_name) if isinstance(in_name, (tuple, list)) else [in_name]
    outs = list(out_name) if isinstance(out_name, (tuple, list)) else [out_name]
    model.eval()
    tmp = folder.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "inputs"))
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, tuple(torch.from_numpy(a) for a in xs), buf,
                          opset_version=opset, do_constant_folding=True, input_names=ins,
                          output_names=outs, training=torch.onnx.TrainingMode.EVAL)
    if external_data:
        onnx.save_model(onnx.load_from_string(buf.getvalue()), os.path.join(tmp, "model.onnx"),
                        save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx.data", size_threshold=1024)
    else:
        with open(os.path.join(tmp, "model.onnx"), "wb") as f:
            f.write(buf.getvalue())
    for a, name in zip(xs, ins):
        np.save(os.path.join(tmp, "inputs", name + ".npy"), a)
    os.makedirs(os.path.join(folder, "inputs"), exist_ok=True)
    for f in sorted(os.listdir(os.path.join(tmp, "inputs"))):
        os.replace(os.path.join(tmp, "inputs", f), os.path.join(folder, "inputs", f))
    for f in sorted(os.listdir(tmp), key=lambda f: f == "model.onnx"):  # the model last
        if f != "inputs":
            os.replace(os.path.join(tmp, f), os.path.join(folder, f))
    shutil.rmtree(tmp)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                   nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + self.skip(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32),
                                  nn.ReLU())
        self.blocks = nn.Sequential(Block(32, 32, 1), Block(32, 64, 2), Block(64, 128, 2),
                                    Block(128, 256, 2))
        self.fc = nn.Linear(256, 1000)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Layer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-1, -2) * (d // h) ** -0.5, dim=-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[Layer(256, 4) for _ in range(6)])

    def forward(self, x):
        return self.layers(x)


class SuperRes(nn.Module):
    def __init__(self, r=3):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 64, 5, 1, 2), nn.Tanh(), nn.Conv2d(64, 64, 3, 1, 1),
                                  nn.Tanh(), nn.Conv2d(64, 32, 3, 1, 1), nn.Tanh(),
                                  nn.Conv2d(32, r * r, 3, 1, 1))
        self.shuffle = nn.PixelShuffle(r)

    def forward(self, x):
        return torch.sigmoid(self.shuffle(self.body(x)))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(1024, 1024), nn.GELU())])

    def forward(self, x):
        return self.net(x)


def main(out):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    r = ResNet()
    for m in r.modules():  # non-trivial BatchNorm statistics to fold
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    export(r, rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32), "image", "logits",
           os.path.join(out, "resnet"))
    export(Transformer(), rng.normal(0, 1, (1, 256, 256)).astype(np.float32), "tokens", "hidden",
           os.path.join(out, "transformer"))
    export(SuperRes(), rng.uniform(0, 1, (1, 1, 256, 256)).astype(np.float32), "image", "upscaled",
           os.path.join(out, "superres256"))
    export(MLP(), rng.normal(0, 1, (64, 1024)).astype(np.float32), "x", "y",
           os.path.join(out, "mlp"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench_models")
