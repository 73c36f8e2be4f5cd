#!/usr/bin/python3
"""Build the three example models of fpguard and their sample inputs.

    /usr/bin/python3 examples/make_examples.py [TARGET_DIR]

Writes, under TARGET_DIR (default: the folder of this script):

    superres/model.onnx           superres/inputs/pixels.npy
    transformer_block/model.onnx  transformer_block/inputs/tokens.npy
    clean_cnn/model.onnx          clean_cnn/inputs/image.npy

Every model is a small PyTorch module with seeded weights, exported with
torch.onnx.export (opset 13, constant folding, fixed shapes, eval mode).
Every input is float32 from a seeded numpy generator. Running the script twice
writes byte-identical files. Needs torch (1.13 was used), onnx and numpy:
Debian's /usr/bin/python3 has them.

Each example checks, in numpy, the property it exists to show (see README.md)
and stops with an error if a change of weights or input broke it.
"""

import argparse
import io
import os
import sys

import numpy as np
import torch
import torch.nn as nn

OPSET = 13
FP16_MAX = 65504.0


def seed_everything(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)


def export(model, example, input_name, output_name, folder):
    """Export `model` (eval mode, fixed shapes) to folder/model.onnx and save
    `example` as folder/inputs/<input_name>.npy."""
    model.eval()
    os.makedirs(os.path.join(folder, "inputs"), exist_ok=True)
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            model,
            (torch.from_numpy(example),),
            buf,
            opset_version=OPSET,
            do_constant_folding=True,
            input_names=[input_name],
            output_names=[output_name],
            training=torch.onnx.TrainingMode.EVAL,
        )
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(buf.getvalue())
    assert example.dtype == np.float32
    np.save(os.path.join(folder, "inputs", input_name + ".npy"), example)
    with torch.no_grad():
        return model(torch.from_numpy(example)).numpy()


def onnx_op_types(folder):
    import onnx

    m = onnx.load(os.path.join(folder, "model.onnx"))
    onnx.checker.check_model(m)
    return [n.op_type for n in m.graph.node]


# ---------------------------------------------------------------------------
# 1. superres: pixel normalisation whose x**2 overflows float16
# ---------------------------------------------------------------------------


class SuperRes(nn.Module):
    """[1,3,32,32] pixels in 0..255 -> [1,3,64,64]. The pixel normalisation
    (as in ProGAN/StyleGAN) squares the first conv's raw outputs, which reach
    several hundred on 0..255 input: x**2 > 65504 overflows float16."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.conv3 = nn.Conv2d(16, 12, 3, padding=1)
        self.relu = nn.ReLU()
        self.shuffle = nn.PixelShuffle(2)

    def forward(self, pixels):
        x = self.relu(self.conv1(pixels))
        x = x * torch.rsqrt(torch.mean(x**2, dim=1, keepdim=True) + 1e-8)
        x = self.relu(self.conv2(x))
        x = self.conv3(x)
        return self.shuffle(x)


def conv2d_nchw(x, w, b, pad):
    """Plain numpy convolution (stride 1), used to check the first conv."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, o, h, wd), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i : i + h, j : j + wd]  # n c h w
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.float64))
    return out + b.astype(np.float64)[None, :, None, None]


def make_superres(root):
    seed_everything(1)
    model = SuperRes()
    rng = np.random.default_rng(1001)
    pixels = rng.integers(0, 256, size=(1, 3, 32, 32)).astype(np.float32)

    # The squaring must overflow float16 on the sample input: some conv1
    # output (after ReLU) must exceed sqrt(65504) ~ 255.9; ask for > 300.
    w = model.conv1.weight.detach().numpy()
    b = model.conv1.bias.detach().numpy()
    peak = np.maximum(conv2d_nchw(pixels, w, b, 1), 0).max()
    scale = 1.0
    if peak < 400.0:  # scale up for a clear margin
        scale = 400.0 / peak
        with torch.no_grad():
            model.conv1.weight.mul_(scale)
        w = model.conv1.weight.detach().numpy()
    relu1 = np.maximum(conv2d_nchw(pixels, w, b, 1), 0)
    assert relu1.max() > 300.0, relu1.max()
    assert (relu1.astype(np.float64) ** 2).max() > FP16_MAX

    folder = os.path.join(root, "superres")
    out = export(model, pixels, "pixels", "upscaled", folder)
    assert out.shape == (1, 3, 64, 64) and np.isfinite(out).all()
    ops = onnx_op_types(folder)
    assert "Pow" in ops, ops
    return {
        "conv1_weight_scale": round(float(scale), 4),
        "conv1_peak": round(float(relu1.max()), 3),
        "pixels_squared_over_fp16_max": int(((relu1.astype(np.float64) ** 2) > FP16_MAX).sum()),
    }


# ---------------------------------------------------------------------------
# 2. transformer_block: pre-norm block whose LayerNorm variance overflows
# ---------------------------------------------------------------------------


class SelfAttention(nn.Module):
    def __init__(self, dim, heads, tokens):
        super().__init__()
        self.dim, self.heads, self.tokens = dim, heads, tokens
        self.head_dim = dim // heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.scale = 1.0 / float(self.head_dim) ** 0.5

    def forward(self, x):
        t, h, d = self.tokens, self.heads, self.head_dim
        q = self.q(x).reshape(1, t, h, d).transpose(1, 2)  # 1 h t d
        k = self.k(x).reshape(1, t, h, d).transpose(1, 2)
        v = self.v(x).reshape(1, t, h, d).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(2, 3)) * self.scale  # 1 h t t
        attn = torch.softmax(scores, dim=-1)
        y = torch.matmul(attn, v).transpose(1, 2).reshape(1, t, self.dim)
        return self.proj(y)


class TransformerBlock(nn.Module):
    """Pre-norm encoder block: x + attn(ln1(x)); x + mlp(ln2(x)).

    branch_gain scales the output projections of the attention and the MLP,
    so that the block's update has about the RMS of the residual stream's
    ordinary channels (as in the middle of a deep pre-norm model, where the
    stream has grown). With PyTorch's default initialisation the update
    would be ~0.5 RMS and the outlier channels, which the residual copies
    through, would hide any damage to it in the output's cosine."""

    def __init__(self, dim=64, heads=4, tokens=16, hidden=256, branch_gain=16.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, tokens)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        with torch.no_grad():
            self.attn.proj.weight.mul_(branch_gain)
            self.mlp[2].weight.mul_(branch_gain)

    def forward(self, tokens):
        x = tokens + self.attn(self.ln1(tokens))
        return x + self.mlp(self.ln2(x))


OUTLIER_CHANNELS = (7, 41)
STREAM_STD = 8.0  # RMS of the ordinary channels of the residual stream


def make_transformer_block(root):
    seed_everything(2)
    model = TransformerBlock()
    # Non-trivial LayerNorm affine parameters, as in a trained model.
    with torch.no_grad():
        for ln in (model.ln1, model.ln2):
            ln.weight.copy_(1.0 + 0.1 * torch.randn(64))
            ln.bias.copy_(0.1 * torch.randn(64))

    # A residual stream with outlier features: most channels ~N(0, 8^2), two
    # fixed channels of magnitude 300..1000 in every token (as in LLMs).
    rng = np.random.default_rng(1002)
    tokens = STREAM_STD * rng.standard_normal((1, 16, 64))
    tokens[..., OUTLIER_CHANNELS[0]] = rng.uniform(300.0, 1000.0, size=16)
    tokens[..., OUTLIER_CHANNELS[1]] = -rng.uniform(300.0, 1000.0, size=16)
    tokens = tokens.astype(np.float32)

    # The first LayerNorm's Pow computes (x - mean)^2: it must exceed 65504.
    centred = tokens.astype(np.float64) - tokens.astype(np.float64).mean(-1, keepdims=True)
    sq = centred**2
    assert sq.max() > FP16_MAX, sq.max()

    folder = os.path.join(root, "transformer_block")
    out = export(model, tokens, "tokens", "hidden", folder)
    assert out.shape == (1, 16, 64) and np.isfinite(out).all()
    ops = onnx_op_types(folder)
    assert "Pow" in ops and "LayerNormalization" not in ops, ops
    return {
        "max_centred_square": round(float(sq.max()), 1),
        "squares_over_fp16_max": int((sq > FP16_MAX).sum()),
    }


# ---------------------------------------------------------------------------
# 3. clean_cnn: a classifier that float16 runs accurately
# ---------------------------------------------------------------------------


class CleanCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(32, 10)

    def forward(self, image):
        x = self.pool(self.relu(self.bn1(self.conv1(image))))
        x = self.relu(self.conv2(x))
        return self.fc(self.flatten(self.gap(x)))


def make_clean_cnn(root):
    seed_everything(3)
    model = CleanCNN()
    # Running statistics of a "trained" BatchNorm, so that it does something.
    with torch.no_grad():
        model.bn1.running_mean.copy_(0.1 * torch.randn(16))
        model.bn1.running_var.copy_(0.5 + torch.rand(16))
        model.bn1.weight.copy_(1.0 + 0.1 * torch.randn(16))
        model.bn1.bias.copy_(0.1 * torch.randn(16))
    rng = np.random.default_rng(1003)
    image = rng.uniform(-1.0, 1.0, size=(1, 3, 32, 32)).astype(np.float32)

    folder = os.path.join(root, "clean_cnn")
    out = export(model, image, "image", "logits", folder)
    assert out.shape == (1, 10) and np.isfinite(out).all()
    onnx_op_types(folder)
    return {"logits_absmax": round(float(np.abs(out).max()), 4)}


def make_tensors(root):
    """Tensors for the documentation's `round` and `inspect` examples: activations with
    one outlier past float16's max (x.npy), and a .npz of gradients, one of them too
    small for float16 (grads.npz)."""
    folder = os.path.join(root, "tensors")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(1000) * 1000).astype(np.float32)
    x[123] = 70000.0
    np.save(os.path.join(folder, "x.npy"), x)
    grads = {"fc1.weight": (rng.standard_normal((64, 32)) * 1e-3).astype(np.float32),
             "fc2.weight": (rng.standard_normal((10, 64)) * 1e-7).astype(np.float32)}
    np.savez(os.path.join(folder, "grads.npz"), **grads)
    return {"x_absmax": float(np.abs(x).max()),
            "grads_absmax": ",".join("%.3g" % np.abs(g).max() for g in grads.values())}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", nargs="?", default=here,
                    help="folder to write the examples into (default: %(default)s)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name, make in (("superres", make_superres),
                       ("transformer_block", make_transformer_block),
                       ("clean_cnn", make_clean_cnn)):
        facts = make(args.target)
        size = os.path.getsize(os.path.join(args.target, name, "model.onnx"))
        details = ", ".join("%s=%s" % kv for kv in facts.items())
        print("%s: model.onnx %d bytes; %s" % (name, size, details))
    facts = make_tensors(args.target)
    print("tensors: x.npy, grads.npz; " + ", ".join("%s=%s" % kv for kv in facts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
