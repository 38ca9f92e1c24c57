#!/usr/bin/env python3
"""Side-by-side: voxtrain's Go convolution kernels (cpu/kern) vs PyTorch's
conv3d, op by op, for every convolution of the reference U-Net's training step
(/work/shared/bench/torch_unet_step.py: features 16-32-64-128, in 1, out 2,
3x3x3 convs pad 1, stride-2 first conv on levels 2-4, ConvTranspose3d(2, 2),
1x1x1 head) at batch 2 x 64^3 and 1 x 96^3.

Go and PyTorch runs alternate (Go, torch, Go, torch, ...) for --repeats rounds;
each reported number is the median over the rounds (each round itself times
--iters calls of an op after one warm-up call). torch.set_num_threads(--threads)
and GOMAXPROCS=--threads.

The ops, per layer, are the ones a training step runs:
  conv layer:  fwd = conv3d, bwd_data = grad wrt input, bwd_weight = grad wrt
               weight and bias (no bwd_data for the input layer);
  up layer:    fwd = conv_transpose3d, bwd_data / bwd_weight its gradients.
On the PyTorch side the two backward parts are timed as separate
aten::convolution_backward calls (output_mask [1,0,0] and [0,1,1]); a training
step makes one call with both, also timed (column "torch bwd both").
On the Go side a ConvTranspose3d(2, 2) layer is Conv3DBackwardData of the
stride-2 convolution (see BenchmarkUNet in cpu/kern/bench_test.go).

Usage (from the repository root; Debian's interpreter has torch):
  go test -c -o /tmp/kern.test ./cpu/kern
  /usr/bin/python3 cpu/kern/testdata/torch_conv_bench.py --go-test /tmp/kern.test
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F


def unet_layers(n, s):
    """Mirror of unetLayers in bench_test.go: (name, kind, cin, cout, k,
    stride, pad, in_side) in PyTorch's terms (for 'up', cin -> cout is the
    transposed convolution's own direction)."""
    L = []
    def c3(name, side, ci, co, st):
        L.append((name, "conv", ci, co, 3, st, 1, side))
    c3("enc1a", s, 1, 16, 1)
    c3("enc1b", s, 16, 16, 1)
    c3("enc2a", s, 16, 32, 2)
    c3("enc2b", s // 2, 32, 32, 1)
    c3("enc3a", s // 2, 32, 64, 2)
    c3("enc3b", s // 4, 64, 64, 1)
    c3("enc4a", s // 4, 64, 128, 2)
    c3("enc4b", s // 8, 128, 128, 1)
    L.append(("up3", "up", 128, 64, 2, 2, 0, s // 8))
    c3("dec3a", s // 4, 128, 64, 1)
    c3("dec3b", s // 4, 64, 64, 1)
    L.append(("up2", "up", 64, 32, 2, 2, 0, s // 4))
    c3("dec2a", s // 2, 64, 32, 1)
    c3("dec2b", s // 2, 32, 32, 1)
    L.append(("up1", "up", 32, 16, 2, 2, 0, s // 2))
    c3("dec1a", s, 32, 16, 1)
    c3("dec1b", s, 16, 16, 1)
    L.append(("head", "conv", 16, 2, 1, 1, 0, s))
    return L


def layer_flops(n, kind, ci, co, k, st, pad, side):
    """2 x multiply-adds of one pass (same for fwd, bwd_data, bwd_weight)."""
    if kind == "up":
        return 2 * n * side ** 3 * ci * co * k ** 3
    out = (side + 2 * pad - k) // st + 1
    return 2 * n * out ** 3 * ci * co * k ** 3


def torch_ops(n, layer):
    """Closures for fwd, bwd_data, bwd_weight, bwd_both of one layer."""
    name, kind, ci, co, k, st, pad, side = layer
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, ci, side, side, side, generator=g)
    st3, pad3 = [st] * 3, [pad] * 3
    if kind == "conv":
        w = torch.randn(co, ci, k, k, k, generator=g)
        b = torch.randn(co, generator=g)
        y = F.conv3d(x, w, b, stride=st, padding=pad)
        transposed = False
        fwd = lambda: F.conv3d(x, w, b, stride=st, padding=pad)
    else:
        w = torch.randn(ci, co, k, k, k, generator=g)
        b = torch.randn(co, generator=g)
        y = F.conv_transpose3d(x, w, b, stride=st)
        transposed = True
        fwd = lambda: F.conv_transpose3d(x, w, b, stride=st)
    dy = torch.randn(y.shape, generator=g)

    def bwd(mask):
        return lambda: torch.ops.aten.convolution_backward(
            dy, x, w, [co], st3, pad3, [1, 1, 1], transposed, [0, 0, 0], 1, mask)
    return {"fwd": fwd, "bwd_data": bwd([True, False, False]),
            "bwd_weight": bwd([False, True, True]), "bwd_both": bwd([True, True, True])}


def time_torch(configs, iters):
    res = {}
    with torch.no_grad():
        for n, s in configs:
            for layer in unet_layers(n, s):
                ops = torch_ops(n, layer)
                for op, f in ops.items():
                    if layer[0] == "enc1a" and op in ("bwd_data", "bwd_both"):
                        continue  # the input needs no gradient in a step
                    f()
                    ts = []
                    for _ in range(iters):
                        t0 = time.perf_counter()
                        f()
                        ts.append(time.perf_counter() - t0)
                    res[f"b{n}s{s}/{layer[0]}/{op}"] = statistics.median(ts)
                del ops
    return res


BENCH_RE = re.compile(r"^BenchmarkUNet/(\S+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op")


def time_go(binary, configs, iters, threads):
    pat = "|".join(f"b{n}s{s}" for n, s in configs)
    env = dict(os.environ, GOMAXPROCS=str(threads))
    out = subprocess.run([binary, "-test.run", "^$", "-test.bench", f"^BenchmarkUNet$/({pat})/",
                          "-test.benchtime", f"{iters}x"],
                         env=env, stdout=subprocess.PIPE, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        m = BENCH_RE.match(line)
        if m:
            res[m.group(1)] = float(m.group(3)) / 1e9
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go-test", required=True, help="test binary of ./cpu/kern (go test -c)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--configs", default="2x64,1x96", help="batch x side, comma separated")
    args = ap.parse_args()
    configs = [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")]
    torch.set_num_threads(args.threads)
    t_start = time.time()
    load0 = os.getloadavg()
    go_runs, torch_runs = [], []
    for r in range(args.repeats):
        print(f"round {r + 1}/{args.repeats}: Go ...", file=sys.stderr, flush=True)
        go_runs.append(time_go(args.go_test, configs, args.iters, args.threads))
        print(f"round {r + 1}/{args.repeats}: PyTorch ...", file=sys.stderr, flush=True)
        torch_runs.append(time_torch(configs, args.iters))
    load1 = os.getloadavg()

    def med(runs, key):
        v = [r[key] for r in runs if key in r]
        return statistics.median(v) if v else float("nan")

    print(f"# torch {torch.__version__}, threads {args.threads}, {args.repeats} rounds x {args.iters} calls, "
          f"load average {load0[0]:.2f} -> {load1[0]:.2f}, wall {time.time() - t_start:.0f} s\n")
    for n, s in configs:
        print(f"## batch {n} x {s}^3\n")
        print("| layer | op | GFLOP | Go ms | torch ms | Go GFLOP/s | torch GFLOP/s | torch/Go | torch bwd both ms |")
        print("|---|---|---|---|---|---|---|---|---|")
        tot = {"go": 0.0, "torch": 0.0, "torch_step": 0.0, "flop": 0.0}
        for layer in unet_layers(n, s):
            fl = layer_flops(n, *layer[1:])
            for op in ("fwd", "bwd_data", "bwd_weight"):
                if layer[0] == "enc1a" and op == "bwd_data":
                    continue
                key = f"b{n}s{s}/{layer[0]}/{op}"
                g, t = med(go_runs, key), med(torch_runs, key)
                both = ""
                if op == "bwd_weight":
                    bkey = f"b{n}s{s}/{layer[0]}/bwd_both"
                    tb = med(torch_runs, bkey) if layer[0] != "enc1a" else t
                    both = f"{1e3 * tb:.1f}"
                    tot["torch_step"] += tb
                elif op == "fwd":
                    tot["torch_step"] += t
                tot["go"] += g
                tot["torch"] += t
                tot["flop"] += fl
                print(f"| {layer[0]} | {op} | {fl / 1e9:.2f} | {1e3 * g:.1f} | {1e3 * t:.1f} | "
                      f"{fl / g / 1e9:.1f} | {fl / t / 1e9:.1f} | {t / g:.2f} | {both} |")
        print(f"| **all convolutions of a step** | | {tot['flop'] / 1e9:.1f} | {1e3 * tot['go']:.0f} | "
              f"{1e3 * tot['torch']:.0f} | {tot['flop'] / tot['go'] / 1e9:.1f} | "
              f"{tot['flop'] / tot['torch'] / 1e9:.1f} | {tot['torch'] / tot['go']:.2f} | "
              f"{1e3 * tot['torch_step']:.0f} (fwd + bwd both) |\n")


if __name__ == "__main__":
    main()
