#!/usr/bin/env python3
"""PyTorch + cuDNN side of voxtrain's GPU step-time comparison (docs/GPU.md).

Trains the same networks as `gpu.test -test.bench UNetStep` on the same
work, on a CUDA GPU, and prints median ms per step:

  ref-2x64, ref-1x96   the reference U-Net of bench/torch_unet_step.py:
                       channels (16, 32, 64, 128), 2 x [Conv3d 3x3x3 (bias) ->
                       InstanceNorm3d(affine) -> LeakyReLU(0.01)] per level,
                       stride-2 first conv below level 0, ConvTranspose3d(2, 2)
                       up, concat, 1x1x1 head to 2 classes; CE + (1 - batch
                       soft Dice of class 1, smooth 1e-5); SGD lr 0.01,
                       momentum 0.99, Nesterov.
  nnunet-2x128         nnU-Net's 3d_fullres network for a 128^3 patch:
                       channels (32, 64, 128, 256, 320, 320), deep supervision
                       (heads on every decoder stage but the lowest, weights
                       1, 1/2, 1/4, ... renormalised), same loss per output.

Each runs with TF32 off (fp32, voxtrain's --device cuda), on (PyTorch's
default for convolutions; voxtrain's --device cuda,tf32) and under bf16
autocast (voxtrain's --device cuda,bf16), cudnn.benchmark on. Timing: torch.cuda.synchronize() around each step, median of --steps
after --warmup.

With --compile the model is torch.compile'd first (nnU-Net v2 compiles by
default); the warm-up steps then include the compilation.

Usage (on the GPU node):
  python3 torch_unet_step_cuda.py [--steps 20] [--warmup 5] [--configs ref-2x64,nnunet-2x128]
                                  [--maths fp32,tf32,bf16] [--compile]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvBlock(nn.Sequential):
    def __init__(self, cin, cout, stride=1):
        super().__init__(nn.Conv3d(cin, cout, 3, stride=stride, padding=1),
                         nn.InstanceNorm3d(cout, affine=True),
                         nn.LeakyReLU(0.01, inplace=True))


class UNet3D(nn.Module):
    def __init__(self, ch, cin=1, ncls=2, deep_supervision=False):
        super().__init__()
        self.enc = nn.ModuleList()
        prev = cin
        for i, c in enumerate(ch):
            self.enc.append(nn.Sequential(ConvBlock(prev, c, stride=1 if i == 0 else 2), ConvBlock(c, c)))
            prev = c
        self.up, self.dec, self.heads = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        for c_skip in reversed(ch[:-1]):
            self.up.append(nn.ConvTranspose3d(prev, c_skip, 2, stride=2))
            self.dec.append(nn.Sequential(ConvBlock(2 * c_skip, c_skip), ConvBlock(c_skip, c_skip)))
            self.heads.append(nn.Conv3d(c_skip, ncls, 1))
            prev = c_skip
        self.ds = deep_supervision

    def forward(self, x):
        skips = []
        for lvl in self.enc:
            x = lvl(x)
            skips.append(x)
        outs = []
        for up, dec, head, skip in zip(self.up, self.dec, self.heads, reversed(skips[:-1])):
            x = dec(torch.cat([up(x), skip], dim=1))
            outs.append(head(x))
        if not self.ds:
            return [outs[-1]]
        return outs[::-1]  # highest resolution first


def seg_loss(logits, target):
    ce = F.cross_entropy(logits, target)
    p = torch.softmax(logits, dim=1)[:, 1]
    g = (target == 1).float()
    inter = (p * g).sum()
    dice = (2 * inter + 1e-5) / (p.sum() + g.sum() + 1e-5)
    return ce + (1 - dice)


def ds_weights(n):
    # nnU-Net: 1, 1/2, 1/4, ... with the lowest output weighted 0, renormalised.
    w = [1 / 2 ** i for i in range(n)]
    if n > 1:
        w[-1] = 0
    s = sum(w)
    return [x / s for x in w]


def make_target(b, s, device):
    g = torch.Generator().manual_seed(1)
    t = torch.zeros(b, s, s, s, dtype=torch.long)
    for i in range(b):
        c = torch.randint(s // 4, 3 * s // 4, (3,), generator=g)
        r = s // 6
        t[i, c[0] - r:c[0] + r, c[1] - r:c[1] + r, c[2] - r:c[2] + r] = 1
    return t.to(device)


CONFIGS = [
    ("ref-2x64", (16, 32, 64, 128), False, 2, 64),
    ("ref-1x96", (16, 32, 64, 128), False, 1, 96),
    ("nnunet-2x128", (32, 64, 128, 256, 320, 320), True, 2, 128),
]


def run(name, ch, ds, batch, side, math, steps, warmup, compile_model=False):
    tf32 = math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = UNet3D(ch, deep_supervision=ds).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.99, nesterov=True)
    params = sum(p.numel() for p in model.parameters())
    if compile_model:
        torch._dynamo.reset()
        model = torch.compile(model)
    x = torch.randn(batch, 1, side, side, side, device=dev)
    y = make_target(batch, side, dev)
    targets = None
    times = []
    torch.cuda.reset_peak_memory_stats()
    for i in range(warmup + steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        # bf16: autocast runs the convolutions in bfloat16 (fp32 weights
        # and accumulation), voxtrain's --device cuda,bf16; losses fp32.
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=math == "bf16"):
            outs = model(x)
        outs = [o.float() for o in outs]
        if targets is None:  # nearest-exact downsampled labels per output
            targets = [y if o.shape[2:] == y.shape[1:] else
                       F.interpolate(y[:, None].float(), size=o.shape[2:], mode="nearest-exact")[:, 0].long()
                       for o in outs]
        w = ds_weights(len(outs))
        loss = sum(wi * seg_loss(o, t) for wi, o, t in zip(w, outs, targets) if wi > 0)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return dict(config=name, math=math, tf32=tf32, compiled=compile_model, batch=batch, side=side, params=params,
                median_ms=1000 * statistics.median(times), min_ms=1000 * min(times), max_ms=1000 * max(times),
                peak_mib=torch.cuda.max_memory_allocated() / 2 ** 20)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--configs", default=",".join(c[0] for c in CONFIGS))
    ap.add_argument("--maths", default="fp32,tf32,bf16")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    args = ap.parse_args()
    want = args.configs.split(",")
    print(f"# {torch.cuda.get_device_name()} | torch {torch.__version__} | CUDA {torch.version.cuda} | "
          f"cuDNN {torch.backends.cudnn.version()}")
    for name, ch, ds, b, s in CONFIGS:
        if name not in want:
            continue
        for math in args.maths.split(","):
            r = run(name, ch, ds, b, s, math, args.steps, args.warmup, args.compile)
            tag = " compiled" if args.compile else ""
            print(f"{name} {math}{tag}: median {r['median_ms']:.1f} ms/step "
                  f"(min {r['min_ms']:.1f}, max {r['max_ms']:.1f}), peak {r['peak_mib']:.0f} MiB")
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
