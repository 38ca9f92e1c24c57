#!/usr/bin/env python3
"""Random-patch read benchmark of an OME-Zarr store: zarr-python and
tensorstore read the same patches the Go reader (zarrread) reads.

  bench.py make DIR            write DIR/bench.ome.zarr (1024³ uint8, 128³
                               chunks, blosc zstd clevel 5 + byte shuffle)
                               and DIR/patches.txt (the patch list)
  bench.py read LIB DIR T [C]  read every patch of DIR/patches.txt with LIB
                               (zarr | tensorstore) on T threads; prints JSON.
                               C: a chunk cache of C bytes (default 0: none),
                               to compare with the Go reader's: tensorstore's
                               cache_pool, zarr-python's CacheStore

The data is smoothed noise: a low-frequency field (a 16³ grid of uniform
noise, trilinearly upsampled 64×) plus uniform noise of ±12 grey levels,
clipped to uint8, generated from fixed seeds. Every library returns each
patch as float32 (what the training pipeline consumes). No chunk cache on
either Python side unless C is given (zarr-python has none by default,
its experimental CacheStore keeps stored bytes; tensorstore's cache_pool
is 0 by default).
Needs numpy, zarr (3.x) and tensorstore from PyPI; used only to make the
numbers in docs/BENCHMARKS.md, never at test or run time.
"""
import json
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

N, CHUNK, PATCH, NPATCH = 1024, 128, 128, 200


def make(d):
    import zarr
    from numcodecs import Blosc
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "bench.ome.zarr")
    rng = np.random.default_rng(1234)
    coarse = rng.uniform(40, 215, size=(17, 17, 17)).astype(np.float32)
    g = zarr.open_group(path, mode="w", zarr_format=2)
    a = g.create_array("0", shape=(N, N, N), chunks=(CHUNK,) * 3, dtype="uint8",
                       compressors=Blosc(cname="zstd", clevel=5, shuffle=Blosc.SHUFFLE),
                       fill_value=0)
    g.attrs["multiscales"] = [{"version": "0.4", "axes": [
        {"name": a, "type": "space", "unit": "micrometer"} for a in "zyx"],
        "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1, 1]}]}]}]
    # Trilinear upsampling of the coarse grid: 64 voxels per coarse cell.
    t = (np.arange(N, dtype=np.float32) + 0.5) / 64 - 0.5
    t = np.clip(t, 0, 15.999)
    i0 = t.astype(np.int64)
    w = (t - i0).astype(np.float32)
    for z0 in range(0, N, CHUNK):
        zs = slice(z0, z0 + CHUNK)
        # interpolate along z, then y, then x
        cz = coarse[i0[zs]] * (1 - w[zs, None, None]) + coarse[i0[zs] + 1] * w[zs, None, None]
        cy = cz[:, i0] * (1 - w[None, :, None]) + cz[:, i0 + 1] * w[None, :, None]
        cx = cy[:, :, i0] * (1 - w[None, None, :]) + cy[:, :, i0 + 1] * w[None, None, :]
        noise = rng.integers(-12, 13, size=cx.shape, dtype=np.int16)
        a[zs] = np.clip(cx + noise, 0, 255).astype(np.uint8)
        print(f"slab {z0}", file=sys.stderr)
    prng = np.random.default_rng(99)
    with open(os.path.join(d, "patches.txt"), "w") as f:
        for _ in range(NPATCH):
            z, y, x = prng.integers(0, N - PATCH + 1, size=3)
            f.write(f"{z} {y} {x}\n")


def patches(d):
    with open(os.path.join(d, "patches.txt")) as f:
        return [tuple(int(v) for v in line.split()) for line in f if line.strip()]


def read(lib, d, threads, cache_bytes=0):
    path = os.path.join(d, "bench.ome.zarr", "0")
    ps = patches(d)
    if lib == "zarr":
        import zarr
        zarr.config.set({"threading.max_workers": threads})
        store = path
        version = zarr.__version__
        if cache_bytes:
            # zarr-python 3.1's experimental CacheStore: an LRU of the
            # stored (compressed) chunk bytes, the only chunk cache it has.
            from zarr.experimental.cache_store import CacheStore
            from zarr.storage import LocalStore, MemoryStore
            store = CacheStore(store=LocalStore(path, read_only=True), cache_store=MemoryStore(), max_size=cache_bytes)
            version += f", {cache_bytes >> 20} MiB CacheStore"
        arr = zarr.open_array(store, mode="r")
        get = lambda p: arr[p[0]:p[0] + PATCH, p[1]:p[1] + PATCH, p[2]:p[2] + PATCH]
    elif lib == "tensorstore":
        import tensorstore as ts
        ctx = ts.Context({"cache_pool": {"total_bytes_limit": cache_bytes},
                          "data_copy_concurrency": {"limit": threads},
                          "file_io_concurrency": {"limit": threads}})
        arr = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": path}}, read=True, context=ctx).result()
        get = lambda p: arr[p[0]:p[0] + PATCH, p[1]:p[1] + PATCH, p[2]:p[2] + PATCH].read().result()
        from importlib.metadata import version as pkgver
        version = pkgver("tensorstore") + (f", {cache_bytes >> 20} MiB cache" if cache_bytes else "")
    else:
        sys.exit(f"unknown library {lib}")
    check = [0.0] * len(ps)

    def one(i):
        v = get(ps[i]).astype(np.float32)
        check[i] = float(v[::16, ::16, ::16].sum())

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, range(len(ps))))
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"reader": f"{lib} {version}", "threads": threads, "patches": len(ps), "seconds": round(dt, 3),
                      "samples_per_s": round(len(ps) / dt, 2), "peak_rss_mib": round(rss, 1),
                      "checksum": round(sum(check), 1)}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        read(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else 0)
