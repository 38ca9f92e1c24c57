#!/usr/bin/env python3
"""PyTorch's CPU training step of nnU-Net's residual-encoder U-Net, the
reference side of `train bench-step --config scripts/bench_resenc/resenc.yaml`.

The network is nnU-Net's own ResidualEncoderUNet (dynamic-network-architectures,
the ResEnc presets' network) shaped as resenc.yaml's model section: features
16-32-64-128, strides 1-2-2-2, 3x3x3 kernels, 1, 3, 4, 6 residual blocks per
stage, one decoder conv per stage, conv bias, InstanceNorm3d(affine),
LeakyReLU(0.01), 2 classes, no deep supervision. The step is
/work/shared/bench/torch_unet_step.py's: cross-entropy + (1 - batch soft Dice of
the foreground, smooth 1e-5), SGD lr 0.01, Nesterov momentum 0.99, on a random
normal image with one cubic "lesion" per sample; 2 threads.

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch dynamic-network-architectures
    /tmp/tv/bin/python scripts/bench_resenc/torch_resenc_step.py [--batch 2 --side 64 --steps 8]

Prints one JSON line: median / min / max ms per step, parameters, versions.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from dynamic_network_architectures.architectures.unet import ResidualEncoderUNet


def loss_fn(logits, target):
    ce = F.cross_entropy(logits, target)
    p = torch.softmax(logits, dim=1)[:, 1]
    g = (target == 1).float()
    inter = (p * g).sum()
    dice = (2 * inter + 1e-5) / (p.sum() + g.sum() + 1e-5)
    return ce + (1 - dice)


def make_target(b, s):
    g = torch.Generator().manual_seed(1)
    t = torch.zeros(b, s, s, s, dtype=torch.long)
    for i in range(b):
        c = torch.randint(s // 4, 3 * s // 4, (3,), generator=g)
        r = s // 6
        t[i, c[0] - r:c[0] + r, c[1] - r:c[1] + r, c[2] - r:c[2] + r] = 1
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--side", type=int, default=64)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = ResidualEncoderUNet(
        input_channels=1, n_stages=4, features_per_stage=[16, 32, 64, 128], conv_op=nn.Conv3d,
        kernel_sizes=[[3, 3, 3]] * 4, strides=[[1, 1, 1], [2, 2, 2], [2, 2, 2], [2, 2, 2]],
        n_blocks_per_stage=[1, 3, 4, 6], num_classes=2, n_conv_per_stage_decoder=[1, 1, 1], conv_bias=True,
        norm_op=nn.InstanceNorm3d, norm_op_kwargs={"eps": 1e-5, "affine": True}, dropout_op=None,
        nonlin=nn.LeakyReLU, nonlin_kwargs={"negative_slope": 0.01, "inplace": True}, deep_supervision=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.99, nesterov=True)
    x = torch.randn(a.batch, 1, a.side, a.side, a.side)
    y = make_target(a.batch, a.side)
    times = []
    model.train()
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if i >= a.warmup:
            times.append(dt)
        print(f"step {i}: {1000 * dt:.0f} ms loss {loss.item():.4f}", file=sys.stderr, flush=True)
    print(json.dumps(dict(side="pytorch", torch=torch.__version__, threads=a.threads, batch=a.batch, patch=a.side,
                          params=sum(p.numel() for p in model.parameters()),
                          median_ms=1000 * statistics.median(times), min_ms=1000 * min(times), max_ms=1000 * max(times))))


if __name__ == "__main__":
    main()
