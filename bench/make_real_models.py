#!/usr/bin/python3
"""The real-architecture benchmark set (issue 20): the architectures people deploy, with
their real shapes, exported from PyTorch with seeded random weights (no downloads:
`weights=None`, torch.manual_seed), ONNX opset 17:

    resnet50/        torchvision ResNet-50, image [1,3,224,224] -> logits [1,1000]
    mobilenetv3/     torchvision MobileNetV3-Large, [1,3,224,224] -> [1,1000]
    dbnet/           a DBNet-style text detector: MobileNetV3-Large backbone (HardSwish), an
                     FPN (nearest Resize top-down, bilinear Resize to 1/4), a head of Conv and
                     two ConvTranspose; [1,3,640,640] -> probability map [1,1,640,640]
    crnn/            a CRNN recognizer: conv stack, 2-layer bidirectional LSTM (256 each way),
                     Linear to 6625 classes; [1,3,48,320] -> [80,1,6625]
    bert128/, bert512/  a BERT-base encoder (12 post-norm layers, d 768, 12 heads, FFN 3072,
                     GELU; vocabulary 30522): input_ids, attention_mask [1,T] (int64) ->
                     [1,T,768], at T = 128 and 512; weights in external data
    gpt2_128/, gpt2_512/  a GPT-2-small decoder (12 pre-norm layers, d 768, 12 heads, tanh
                     GELU, causal mask, logits from the tied token embedding; vocabulary
                     50257): input_ids [1,T] -> logits [1,T,50257]; weights in external data
    unet/            a U-Net (4 levels down and up, 64 to 1024 channels, ConvTranspose up):
                     [1,3,256,256] -> [1,1,256,256]

BatchNorm statistics are those of the seeded network itself on random inputs (one
training-mode pass with cumulative averages), so activations keep the scale a trained
network's normalisation gives them instead of growing layer after layer; transformer
weights are N(0, 0.02) as in BERT's and GPT-2's initialisation. Each folder gets model.onnx
(+ model.onnx.data), inputs/<input>.npy. Usage:

    make_real_models.py OUT_DIR [NAME ...]      (default: all; Debian's /usr/bin/python3
                                                 with torch, torchvision, onnx, numpy)

Generation takes about 3 minutes of CPU (8 minutes of wall time on a loaded 2-core VM) and
2.2 GB of disk (the transformers' external data: 4 x ~0.5 GB). The model functions take
their widths as arguments, so the tests export small versions of the same architectures
(tests/cli/realarch_test.py)."""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_bench_models import export  # noqa: E402

OPSET = 17


def calibrate(model, shape, batches=2):
    """BatchNorm running statistics from the model's own activations on N(0, 1) inputs of
    `shape` (cumulative averages over `batches` training-mode passes), then eval mode."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(*shape))
    return model.eval()


def conv_bn(cin, cout, k=3, stride=1, act=nn.ReLU):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout),
                         act())


class DBNet(nn.Module):
    """DBNet-style detector (as in PaddleOCR's det_mv3_db): MobileNetV3 stages at strides
    4, 8, 16, 32; an FPN whose top-down path upsamples by nearest Resize and whose levels
    are brought to 1/4 by bilinear Resize and concatenated; a head Conv-BN-ReLU,
    ConvTranspose x2, BN, ReLU, ConvTranspose x2, sigmoid (the probability map)."""

    def __init__(self, inner=96, width_mult=1.0):
        super().__init__()
        import torchvision
        f = torchvision.models.mobilenet_v3_large(weights=None, width_mult=width_mult).features
        self.stages = nn.ModuleList([f[:4], f[4:7], f[7:13], f[13:]])
        x, chans = torch.zeros(1, 3, 32, 32), []  # the stages' output channels
        with torch.no_grad():
            for s in self.stages.eval():
                x = s(x)
                chans.append(x.shape[1])
        self.lateral = nn.ModuleList([nn.Conv2d(c, inner, 1, bias=False) for c in chans])
        self.smooth = nn.ModuleList([nn.Conv2d(inner, inner // 4, 3, 1, 1, bias=False)
                                     for _ in chans])
        q = inner // 4
        self.head = nn.Sequential(conv_bn(inner, q), nn.ConvTranspose2d(q, q, 2, 2),
                                  nn.BatchNorm2d(q), nn.ReLU(), nn.ConvTranspose2d(q, 1, 2, 2),
                                  nn.Sigmoid())

    def forward(self, x):
        feats = []
        for s in self.stages:
            x = s(x)
            feats.append(x)
        lat = [m(f) for m, f in zip(self.lateral, feats)]
        for i in range(len(lat) - 2, -1, -1):  # top-down: nearest upsampling, add
            lat[i] = lat[i] + F.interpolate(lat[i + 1], scale_factor=2.0, mode="nearest")
        size = lat[0].shape[-2:]
        outs = [F.interpolate(m(p), size=size, mode="bilinear", align_corners=False) if i else m(p)
                for i, (m, p) in enumerate(zip(self.smooth, lat))]
        return self.head(torch.cat(outs, 1))


class CRNN(nn.Module):
    """CRNN: a VGG-style conv stack that halves the height to 1 (pools of 2x2, then 2x1),
    the width as the time axis, a bidirectional LSTM of `layers` layers, a Linear to the
    classes per time step: [N,3,H,W] -> [W/4, N, classes]."""

    def __init__(self, widths=(64, 128, 256, 256, 512, 512), hidden=256, layers=2, classes=6625):
        super().__init__()
        pools = [(2, 2), (2, 2), None, (2, 1), None, (2, 1)]
        mods, cin = [], 3
        for w, p in zip(widths, pools):
            mods.append(conv_bn(cin, w))
            if p:
                mods.append(nn.MaxPool2d(p, p))
            cin = w
        self.conv = nn.Sequential(*mods)
        self.rnn = nn.LSTM(cin, hidden, layers, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        y = self.conv(x)                              # [N, C, H', T]
        y = F.adaptive_avg_pool2d(y, (1, None)).squeeze(2).permute(2, 0, 1)  # [T, N, C]
        y, _ = self.rnn(y)
        return self.fc(y)


class UNet(nn.Module):
    """U-Net (Ronneberger et al.): per level two Conv-BN-ReLU, MaxPool down, ConvTranspose
    2x2 up, skip concatenation; a 1x1 Conv to `classes`."""

    def __init__(self, base=64, depth=4, cin=3, classes=1):
        super().__init__()
        ws = [base << i for i in range(depth + 1)]
        self.down = nn.ModuleList([])
        c = cin
        for w in ws:
            self.down.append(nn.Sequential(conv_bn(c, w), conv_bn(w, w)))
            c = w
        self.up = nn.ModuleList([nn.ConvTranspose2d(w, w // 2, 2, 2) for w in ws[:0:-1]])
        self.dec = nn.ModuleList([nn.Sequential(conv_bn(w, w // 2), conv_bn(w // 2, w // 2))
                                  for w in ws[:0:-1]])
        self.out = nn.Conv2d(base, classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        for up, dec, s in zip(self.up, self.dec, skips[-2::-1]):
            x = dec(torch.cat([s, up(x)], 1))
        return self.out(x)


def heads(x, h):
    b, t, d = x.shape
    return x.reshape(b, t, h, d // h).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.h = h

    def forward(self, x, bias):
        q, k, v = (heads(m(x), self.h) for m in (self.q, self.k, self.v))
        s = q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5) + bias
        a = torch.softmax(s, dim=-1) @ v
        return self.o(a.transpose(1, 2).reshape(x.shape))


class BertLayer(nn.Module):
    def __init__(self, d, h, ff):
        super().__init__()
        self.att, self.ln1, self.ln2 = Attention(d, h), nn.LayerNorm(d, 1e-12), nn.LayerNorm(d, 1e-12)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def forward(self, x, bias):
        x = self.ln1(x + self.att(x, bias))
        return self.ln2(x + self.ff(x))


class Bert(nn.Module):
    """BERT encoder (post-norm): word + position + token-type embeddings, LayerNorm,
    `layers` x (self-attention with the additive mask (1 - mask) * -10000, FFN with erf
    GELU): (input_ids, attention_mask) [N,T] -> last hidden state [N,T,d]."""

    def __init__(self, vocab=30522, d=768, h=12, layers=12, ff=3072, positions=512):
        super().__init__()
        self.word, self.pos, self.segment = (nn.Embedding(vocab, d), nn.Embedding(positions, d),
                                          nn.Embedding(2, d))
        self.ln = nn.LayerNorm(d, 1e-12)
        self.layers = nn.ModuleList([BertLayer(d, h, ff) for _ in range(layers)])

    def forward(self, ids, mask):
        t = ids.shape[1]
        pos = torch.arange(t, dtype=torch.int64).unsqueeze(0)
        x = self.ln(self.word(ids) + self.pos(pos) + self.segment(torch.zeros_like(ids)))
        bias = (1.0 - mask[:, None, None, :].to(torch.float32)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x


class GPT2Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.att = Attention(d, h)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d, d))

    def forward(self, x, bias):
        x = x + self.att(self.ln1(x), bias)
        return x + self.mlp(self.ln2(x))


class GPT2(nn.Module):
    """GPT-2 decoder (pre-norm): token + position embeddings, `layers` blocks with a causal
    mask (a lower-triangular buffer, masked scores set to float32's lowest as in Hugging
    Face's implementation), final LayerNorm, logits = h @ wte^T (the tied embedding):
    input_ids [N,T] -> logits [N,T,vocab]."""

    def __init__(self, vocab=50257, d=768, h=12, layers=12, positions=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(positions, d)
        self.blocks = nn.ModuleList([GPT2Block(d, h) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.register_buffer("causal", torch.tril(torch.ones(positions, positions, dtype=torch.bool)))

    def forward(self, ids):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t, dtype=torch.int64).unsqueeze(0))
        low = torch.tensor(torch.finfo(torch.float32).min)
        bias = torch.where(self.causal[:t, :t], torch.tensor(0.0), low)
        for b in self.blocks:
            x = b(x, bias)
        return self.ln(x) @ self.wte.weight.t()


def transformer_init(model):
    """BERT's and GPT-2's initialisation: Linear and Embedding weights N(0, 0.02), biases 0,
    LayerNorm 1 and 0."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)
    return model.eval()


def image(rng, *shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def vision(name, model, shape, out, rng, out_name="logits"):
    export(calibrate(model, (2,) + shape[1:]), image(rng, *shape), "image", out_name,
           os.path.join(out, name), opset=OPSET)


def text(name, model, inputs, out_name, out, rng):
    export(model, inputs, ["input_ids", "attention_mask"][:len(inputs)], out_name,
           os.path.join(out, name), opset=OPSET, external_data=True)


def build(name, out, rng):
    import torchvision
    if name == "resnet50":
        vision(name, torchvision.models.resnet50(weights=None), (1, 3, 224, 224), out, rng)
    elif name == "mobilenetv3":
        vision(name, torchvision.models.mobilenet_v3_large(weights=None), (1, 3, 224, 224), out,
               rng)
    elif name == "dbnet":
        vision(name, DBNet(), (1, 3, 640, 640), out, rng, "maps")
    elif name == "crnn":
        vision(name, CRNN(), (1, 3, 48, 320), out, rng)
    elif name == "unet":
        vision(name, UNet(), (1, 3, 256, 256), out, rng, "mask")
    elif name.startswith("bert"):
        t = int(name[4:])
        ids = rng.integers(0, 30522, (1, t)).astype(np.int64)
        text(name, transformer_init(Bert()), (ids, np.ones((1, t), np.int64)), "hidden", out, rng)
    elif name.startswith("gpt2_"):
        ids = rng.integers(0, 50257, (1, int(name[5:]))).astype(np.int64)
        text(name, transformer_init(GPT2()), (ids,), "logits", out, rng)
    else:
        raise SystemExit(f"make_real_models: unknown model {name!r} (known: {' '.join(NAMES)})")


NAMES = ["resnet50", "mobilenetv3", "dbnet", "crnn", "unet", "bert128", "bert512", "gpt2_128",
         "gpt2_512"]


def main(argv):
    if not argv:
        raise SystemExit(__doc__)
    for name in argv[1:] or NAMES:
        torch.manual_seed(0)  # each model from the same seed, whichever subset is built
        build(name, argv[0], np.random.default_rng(0))
        print(f"make_real_models: {name}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
