#!/usr/bin/env python3
"""Random-patch read benchmark of a 512³ uint16 multi-page TIFF stack:
tifffile reads the same patches the Go reader (tiffread) reads.

  bench.py make DIR             write DIR/stack.tif (512 pages of 512² uint16,
                                uncompressed, one strip per page),
                                DIR/stack_zstd.tif (the same, zstd level 5,
                                16 rows per strip) and DIR/patches.txt
  bench.py read WAY DIR T       read every patch of DIR/patches.txt on T
                                threads; prints JSON. WAY is
                                  memmap  tifffile.memmap(stack.tif)
                                  pages   tifffile.imread(stack_zstd.tif,
                                          key=range(z, z+128)): whole pages
                                  zarr    zarr over tifffile.aszarr
                                          (stack_zstd.tif): the strips only

The data is smoothed noise, as scripts/bench_zarr: a 9³ grid of uniform
noise in 2000..60000 trilinearly upsampled 64× plus uniform noise of ±300,
from fixed seeds. Every reader returns each patch as float32 (what the
training pipeline consumes). tensorstore 0.1.86 is not a reader here: its
"tiff" driver reads one uint8 page per open (2-D images), not a uint16
stack. Needs numpy, tifffile, imagecodecs and zarr (3.x) from PyPI; used
only for the numbers in docs/BENCHMARKS.md, never at test or run time.
"""
import json
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

N, PATCH, NPATCH, CELL = 512, 128, 200, 64


def make(d):
    import tifffile
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(1234)
    g = N // CELL + 1
    coarse = rng.uniform(2000, 60000, size=(g, g, g)).astype(np.float32)
    t = (np.arange(N, dtype=np.float32) + 0.5) / CELL - 0.5
    t = np.clip(t, 0, g - 1 - 1e-3)
    i0 = t.astype(np.int64)
    w = (t - i0).astype(np.float32)
    vol = np.empty((N, N, N), np.uint16)
    for z0 in range(0, N, 64):
        zs = slice(z0, z0 + 64)
        cz = coarse[i0[zs]] * (1 - w[zs, None, None]) + coarse[i0[zs] + 1] * w[zs, None, None]
        cy = cz[:, i0] * (1 - w[None, :, None]) + cz[:, i0 + 1] * w[None, :, None]
        cx = cy[:, :, i0] * (1 - w[None, None, :]) + cy[:, :, i0 + 1] * w[None, None, :]
        noise = rng.integers(-300, 301, size=cx.shape, dtype=np.int32)
        vol[zs] = np.clip(cx + noise, 0, 65535).astype(np.uint16)
    tifffile.imwrite(os.path.join(d, "stack.tif"), vol, photometric="minisblack")
    tifffile.imwrite(os.path.join(d, "stack_zstd.tif"), vol, photometric="minisblack",
                     compression="zstd", compressionargs={"level": 5}, rowsperstrip=16)
    prng = np.random.default_rng(99)
    with open(os.path.join(d, "patches.txt"), "w") as f:
        for _ in range(NPATCH):
            z, y, x = prng.integers(0, N - PATCH + 1, size=3)
            f.write(f"{z} {y} {x}\n")


def patches(d):
    with open(os.path.join(d, "patches.txt")) as f:
        return [tuple(int(v) for v in line.split()) for line in f if line.strip()]


def read(way, d, threads):
    import tifffile
    ps = patches(d)
    P = PATCH
    if way == "memmap":
        mm = tifffile.memmap(os.path.join(d, "stack.tif"), mode="r")
        get = lambda p: mm[p[0]:p[0] + P, p[1]:p[1] + P, p[2]:p[2] + P]
    elif way == "pages":
        path = os.path.join(d, "stack_zstd.tif")
        get = lambda p: tifffile.imread(path, key=range(p[0], p[0] + P), maxworkers=1)[:, p[1]:p[1] + P, p[2]:p[2] + P]
    elif way == "zarr":
        import zarr
        zarr.config.set({"threading.max_workers": threads})
        store = tifffile.imread(os.path.join(d, "stack_zstd.tif"), aszarr=True)
        arr = zarr.open_array(store, mode="r")
        get = lambda p: arr[p[0]:p[0] + P, p[1]:p[1] + P, p[2]:p[2] + P]
        way += f" {zarr.__version__}"
    else:
        sys.exit(f"unknown way {way}")
    check = [0.0] * len(ps)

    def one(i):
        v = np.asarray(get(ps[i])).astype(np.float32)
        check[i] = float(v[::16, ::16, ::16].sum(dtype=np.float64))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, range(len(ps))))
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"reader": f"tifffile {tifffile.__version__} {way}", "threads": threads, "patches": len(ps),
                      "seconds": round(dt, 3), "samples_per_s": round(len(ps) / dt, 2), "peak_rss_mib": round(rss, 1),
                      "checksum": round(sum(check), 1)}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        read(sys.argv[2], sys.argv[3], int(sys.argv[4]))
