#!/usr/bin/env python3
"""PyTorch side of the data-pipeline comparison with `train bench-data`.

Runs the reference DataLoader of /work/shared/bench/torch_pipeline.py (same
dataset, same work per sample) for the given worker counts and prints one
line per run in the units `train bench-data` reports, so the two can be run
interleaved in one session (see docs/bench/data.md).

Usage (from a copy of the bench folder, which torch_pipeline.py needs):
    /usr/bin/python3 torch_side.py --bench /tmp/bench --workers 0,1,2 [--epochs 2]
"""
import argparse
import resource
import statistics
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--bench", default="/tmp/bench")
ap.add_argument("--workers", default="2")
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--persistent", type=int, default=1)
args = ap.parse_args()
sys.path.insert(0, args.bench)
import torch  # noqa: E402
import torch_pipeline as tp  # noqa: E402

torch.manual_seed(0)
ds = tp.NiftiPatchDataset(args.bench + "/data")
def cpu():
    """User+system CPU seconds of this process and its reaped children
    (run_loader deletes its DataLoader, which joins the workers)."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


for w in [int(x) for x in args.workers.split(",")]:
    c0 = cpu()
    r = tp.run_loader(ds, w, bool(args.persistent) and w > 0, args.epochs)
    cpu_ms = 1000 * (cpu() - c0) / r["samples"]
    gap = statistics.mean(r["gaps"]) if r["gaps"] else float("nan")
    print(f"torch workers={w} persistent={bool(args.persistent) and w > 0}: "
          f"{r['sps']:.2f} samples/s, CPU {cpu_ms:.0f} ms/sample, first batch {1000 * r['ttfb'][0]:.0f} ms, "
          f"epoch gap {1000 * gap:.0f} ms, epochs "
          + " / ".join(f"{x:.2f}" for x in r["ep_time"]) + " s", flush=True)
