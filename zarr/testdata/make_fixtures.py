"""Writes the Zarr / OME-Zarr / N5 conformance fixtures of package zarr.

Run twice, once per zarr-python major version, from this directory:

    /tmp/venv-zarr2/bin/python make_fixtures.py   # zarr<3, numcodecs, ome-zarr: v2, OME 0.4, N5
    /tmp/venv-zarr3/bin/python make_fixtures.py   # zarr>=3: v3, sharding, OME 0.5

Each run writes its stores under v2/ or v3/ and expected_v2.json or
expected_v3.json: per store its (D, H, W) shape, channels, dtype, spacing,
origin, and the sha256 of its voxels as float32 little-endian in
(C, D, H, W) C order (NaN as 0x7fc00000). Arrays are 6x7x9 with 4x4x4
chunks, so edge chunks are partial, and two chunks hold only the fill
value and are absent from the store (missing chunks read as the fill).

BENCH=DIR also writes DIR/bench.zarr, a 256^3 uint8 blosc-zstd array the
benchmark reads (not committed: 16 MiB).
"""
import hashlib
import json
import os
import shutil
import sys

import numpy as np
import zarr

MAJOR = int(zarr.__version__.split(".")[0])
SHAPE = (6, 7, 9)
CHUNKS = (4, 4, 4)
# Chunks (by chunk index) that hold only the fill value and are deleted.
MISSING = [(1, 0, 2), (0, 1, 1)]


def base(dtype, fill):
    z, y, x = np.meshgrid(*[np.arange(n) for n in SHAPE], indexing="ij")
    v = (z * 37 + y * 11 + x * 5) % 101
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a = (v * 0.37 - 12.5).astype(dt)
    elif dt.kind == "b":
        a = (v % 3 == 0)
    elif dt.kind == "i":
        a = (v - 50).astype(dt)
        if dt.itemsize >= 2:
            a = (a * 300).astype(dt)
    else:
        a = v.astype(dt)
        if dt.itemsize >= 2:
            a = (a * 600).astype(dt)
    for c in MISSING:
        a[tuple(slice(i * n, (i + 1) * n) for i, n in zip(c, CHUNKS))] = fill
    return a


def checksum(a):
    f = np.ascontiguousarray(a, dtype="<f4").copy()
    f[np.isnan(f)] = np.float32("nan")
    b = f.view("<u4").copy()
    b[np.isnan(f)] = 0x7FC00000
    return hashlib.sha256(b.tobytes()).hexdigest()


EXPECTED = []


def expect(path, a, dtype, spacing=(1, 1, 1), origin=(0, 0, 0), channels=1, labels=None, error=None, **kw):
    shape = list(a.shape[-3:])
    e = {"path": path, "shape": shape, "channels": channels, "dtype": dtype,
         "spacing": list(map(float, spacing)), "origin": list(map(float, origin)),
         "sha256": checksum(a)}
    if labels is not None:
        e["labels"] = labels
    if error:
        e = {"path": path, "error": error}
    e.update(kw)
    EXPECTED.append(e)


def delete_missing(store_dir, sep=".", prefix=""):
    for c in MISSING:
        p = os.path.join(store_dir, prefix + sep.join(map(str, c)))
        if os.path.exists(p):
            os.remove(p)


def v2():
    import numcodecs
    from numcodecs import Blosc, BZ2, GZip, LZ4, LZMA, Zlib, Zstd

    os.makedirs("v2", exist_ok=True)
    # dtypes, one compressor
    for dt in ["|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<f4", "<f8", ">u2", ">i2", ">i4", ">f4", ">f8", "|b1", "<u8", "<i8"]:
        name = "v2/dtype_" + dt.replace("|", "").replace("<", "le_").replace(">", "be_") + ".zarr"
        fill = 3 if np.dtype(dt).kind in "iu" else (True if dt == "|b1" else 0.5)
        a = base(dt, fill)
        z = zarr.open(name, mode="w", shape=SHAPE, chunks=CHUNKS, dtype=dt, compressor=Zlib(level=1), fill_value=fill)
        z[...] = a
        delete_missing(name)
        labels = bool(np.dtype(dt).kind in "iub" and a.min() >= 0 and a.max() <= 255)
        expect(name, a, dt, labels=labels)
    # NaN fill with missing chunks, F order, "/" separator
    a = base("<f4", np.nan)
    z = zarr.open("v2/fill_nan.zarr", mode="w", shape=SHAPE, chunks=CHUNKS, dtype="<f4", compressor=None, fill_value="NaN")
    z[...] = a
    delete_missing("v2/fill_nan.zarr")
    expect("v2/fill_nan.zarr", a, "<f4")
    a = base("<i2", -7)
    z = zarr.open("v2/order_f.zarr", mode="w", shape=SHAPE, chunks=CHUNKS, dtype="<i2", order="F", compressor=GZip(1), fill_value=-7)
    z[...] = a
    delete_missing("v2/order_f.zarr")
    expect("v2/order_f.zarr", a, "<i2")
    a = base("<u2", 9)
    z = zarr.open("v2/sep_slash.zarr", mode="w", shape=SHAPE, chunks=CHUNKS, dtype="<u2", dimension_separator="/", compressor=Zstd(3), fill_value=9)
    z[...] = a
    delete_missing("v2/sep_slash.zarr", sep="/")
    expect("v2/sep_slash.zarr", a, "<u2")
    # compressors
    comps = {"zlib": Zlib(5), "gzip": GZip(5), "zstd": Zstd(5), "lz4": LZ4(1), "bz2": BZ2(5), "lzma": LZMA()}
    for cname in ["blosclz", "lz4", "lz4hc", "zstd", "zlib"]:
        for sh, sname in [(Blosc.NOSHUFFLE, "noshuffle"), (Blosc.SHUFFLE, "shuffle"), (Blosc.BITSHUFFLE, "bitshuffle")]:
            comps[f"blosc_{cname}_{sname}"] = Blosc(cname=cname, clevel=5, shuffle=sh)
    comps["blosc_lz4_shuffle_bs64"] = Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE, blocksize=64)
    comps["blosc_zstd_clevel0"] = Blosc(cname="zstd", clevel=0, shuffle=Blosc.SHUFFLE)
    for cn, comp in comps.items():
        for dt in (["<f4", "|u1"] if cn == "blosc_lz4_shuffle" else ["<f4"]) if cn.startswith("blosc") else ["<i2"]:
            name = f"v2/comp_{cn}_{np.dtype(dt).str[1:]}.zarr"
            fill = 1
            a = base(dt, fill)
            z = zarr.open(name, mode="w", shape=SHAPE, chunks=CHUNKS, dtype=dt, compressor=comp, fill_value=fill)
            z[...] = a
            delete_missing(name)
            expect(name, a, dt, labels=(dt == "|u1"))
    # a larger blosc array: many blocks per chunk, splits, leftover block
    big = (np.arange(16 * 17 * 19, dtype="<u4") % 1000 * 3).reshape(16, 17, 19).astype("<f8")
    for cname, sh, sname in [("blosclz", Blosc.SHUFFLE, "shuffle"), ("lz4", Blosc.BITSHUFFLE, "bitshuffle"), ("zstd", Blosc.SHUFFLE, "shuffle")]:
            name = f"v2/big_blosc_{cname}_{sname}.zarr"
            z = zarr.open(name, mode="w", shape=big.shape, chunks=big.shape, dtype="<f8",
                          compressor=Blosc(cname=cname, clevel=9, shuffle=sh, blocksize=2048))
            z[...] = big
            expect(name, big, "<f8")
    # 4D without OME: channels first
    a = np.stack([base("<f4", 0), base("<f4", 0) * 2 + 1])
    z = zarr.open("v2/channels.zarr", mode="w", shape=a.shape, chunks=(1,) + CHUNKS, dtype="<f4", compressor=Zlib(1))
    z[...] = a
    expect("v2/channels.zarr", a, "<f4", channels=2)

    # OME-NGFF 0.4 with ome-zarr-py: c, z, y, x, two levels
    from ome_zarr.io import parse_url
    from ome_zarr.writer import write_multiscale

    img = np.stack([base("<u2", 0), base("<u2", 0) // 2 + 5])
    lvl1 = img[:, ::2, ::2, ::2].copy()
    path = "v2/ome04.ome.zarr"
    shutil.rmtree(path, ignore_errors=True)
    root = zarr.group(parse_url(path, mode="w").store)
    axes = [{"name": "c", "type": "channel"}, {"name": "z", "type": "space", "unit": "millimeter"},
            {"name": "y", "type": "space", "unit": "millimeter"}, {"name": "x", "type": "space", "unit": "millimeter"}]
    ct = [[{"type": "scale", "scale": [1, 2.5, 0.8, 0.7]}, {"type": "translation", "translation": [0, 10, -5, 3]}],
          [{"type": "scale", "scale": [1, 5.0, 1.6, 1.4]}, {"type": "translation", "translation": [0, 11.25, -4.6, 3.35]}]]
    write_multiscale([img, lvl1], root, axes=axes, coordinate_transformations=ct,
                     storage_options={"chunks": (1,) + CHUNKS, "compressor": Blosc(cname="zstd", shuffle=Blosc.SHUFFLE)})
    expect(path, img, "<u2", spacing=(2.5, 0.8, 0.7), origin=(10, -5, 3), channels=2, levels=2)
    expect(path + "/1", lvl1, "<u2", spacing=(5.0, 1.6, 1.4), origin=(11.25, -4.6, 3.35), channels=2)
    # t (length 1), z, y, x; a label map
    lab = (base("|u1", 0) % 5)[None]
    path = "v2/ome04_tzyx.ome.zarr"
    shutil.rmtree(path, ignore_errors=True)
    root = zarr.group(parse_url(path, mode="w").store)
    axes = [{"name": "t", "type": "time", "unit": "second"}, {"name": "z", "type": "space"},
            {"name": "y", "type": "space"}, {"name": "x", "type": "space"}]
    write_multiscale([lab], root, axes=axes, coordinate_transformations=[[{"type": "scale", "scale": [1, 3, 2, 1]}]],
                     storage_options={"chunks": (1,) + CHUNKS})
    expect(path, lab, "|u1", spacing=(3, 2, 1), labels=True)
    # t of length 2: an error
    path = "v2/ome04_t2.ome.zarr"
    shutil.rmtree(path, ignore_errors=True)
    root = zarr.group(parse_url(path, mode="w").store)
    write_multiscale([np.zeros((2, 2, 3, 4), "|u1")], root, axes=axes,
                     coordinate_transformations=[[{"type": "scale", "scale": [1, 1, 1, 1]}]])
    expect(path, lab, "|u1", error="time axis")

    # N5 through zarr's N5Store (dimensions and blocks reversed: F order)
    from zarr.n5 import N5Store

    n5c = {"raw": None, "gzip": GZip(5), "zlib": Zlib(5), "bzip2": BZ2(5), "xz": LZMA(), "blosc": Blosc(cname="lz4", shuffle=Blosc.SHUFFLE)}
    for cn, comp in n5c.items():
        for dt in ["<u2", "<f4", "|u1"] if cn == "raw" else ["<i2"]:
            path = f"v2/n5_{cn}_{np.dtype(dt).str[1:]}.n5"
            shutil.rmtree(path, ignore_errors=True)
            a = base(dt, 0)
            z = zarr.open(store=N5Store(path), mode="w", shape=SHAPE, chunks=CHUNKS, dtype=dt, compressor=comp)
            z[...] = a
            kw = {}
            if cn == "raw" and dt == "<u2":
                z.attrs["pixelResolution"] = {"dimensions": [0.5, 0.25, 2.0], "unit": "mm"}
                kw = dict(spacing=(2.0, 0.25, 0.5))
            if cn == "gzip":
                z.attrs["resolution"] = [4.0, 3.0, 2.0]
                kw = dict(spacing=(2.0, 3.0, 4.0))
            for c in MISSING:  # N5 blocks are keyed x/y/z
                p = os.path.join(path, "/".join(map(str, c[::-1])))
                if os.path.exists(p):
                    os.remove(p)
            expect(path, a, dt, labels=(dt == "|u1"), **kw)


def v3():
    import numcodecs.zarr3
    from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ShardingCodec, TransposeCodec, ZstdCodec

    os.makedirs("v3", exist_ok=True)

    def arr(path, dt, fill, **kw):
        shutil.rmtree(path, ignore_errors=True)
        a = base(dt, fill)
        z = zarr.create_array(store=path, shape=SHAPE, chunks=kw.pop("chunks", CHUNKS), dtype=dt, fill_value=fill,
                              zarr_format=3, config={"write_empty_chunks": False}, **kw)
        z[...] = a
        return a

    cases = {
        "bytes_le": dict(compressors=None),
        "bytes_be": dict(serializer=BytesCodec(endian="big"), compressors=None),
        "gzip": dict(compressors=GzipCodec(level=5)),
        "zstd": dict(compressors=ZstdCodec(level=3)),
        "zstd_crc32c": dict(compressors=[ZstdCodec(level=3), Crc32cCodec()]),
        "blosc_lz4": dict(compressors=BloscCodec(cname="lz4", shuffle="shuffle")),
        "blosc_zstd_bit": dict(compressors=BloscCodec(cname="zstd", shuffle="bitshuffle")),
        "blosc_blosclz": dict(compressors=BloscCodec(cname="blosclz", shuffle="noshuffle")),
        "transpose": dict(filters=[TransposeCodec(order=[2, 0, 1])], compressors=GzipCodec()),
        "numcodecs_lz4": dict(compressors=numcodecs.zarr3.LZ4()),
        "numcodecs_bz2": dict(compressors=numcodecs.zarr3.BZ2()),
        "keyv2": dict(chunk_key_encoding={"name": "v2", "separator": "."}, compressors=ZstdCodec()),
        "keydot": dict(chunk_key_encoding={"name": "default", "separator": "."}, compressors=None),
        "shard_end": dict(chunks=(2, 2, 4), shards=(4, 4, 8), compressors=ZstdCodec()),
        "shard_gzip": dict(chunks=(2, 2, 2), shards=(4, 4, 4), compressors=GzipCodec()),
        "shard_blosc": dict(chunks=(4, 2, 2), shards=(4, 4, 4), compressors=BloscCodec(cname="zstd", shuffle="shuffle")),
    }
    for cn, kw in cases.items():
        for dt in ["int16", "float32"] if cn in ("bytes_be", "blosc_zstd_bit", "shard_end") else ["int16"]:
            path = f"v3/{cn}_{dt}.zarr"
            a = arr(path, dt, 2, **kw)
            expect(path, a, dt)
    # sharding with the index first, transpose inside shards
    path = "v3/shard_start_uint8.zarr"
    shutil.rmtree(path, ignore_errors=True)
    a = base("uint8", 0)
    z = zarr.create_array(store=path, shape=SHAPE, dtype="uint8", fill_value=0, zarr_format=3, chunks=(4, 4, 4),
                          serializer=ShardingCodec(chunk_shape=(2, 2, 2), codecs=[TransposeCodec(order=[1, 2, 0]), BytesCodec(), ZstdCodec()],
                                                   index_location="start"),
                          compressors=None, config={"write_empty_chunks": False})
    z[...] = a
    expect(path, a, "uint8", labels=True)
    for dt in ["uint8", "int8", "uint16", "uint32", "int32", "int64", "uint64", "float16", "float64", "bool"]:
        path = f"v3/dtype_{dt}.zarr"
        fill = True if dt == "bool" else 1
        a = arr(path, dt, fill, compressors=ZstdCodec())
        expect(path, a, dt)
    path = "v3/fill_nan.zarr"
    a = arr(path, "float32", np.nan, compressors=None)
    expect(path, a, "float32")

    # OME-NGFF 0.5: a zarr v3 group whose attributes hold "ome"
    path = "v3/ome05.ome.zarr"
    shutil.rmtree(path, ignore_errors=True)
    img = base("int16", 0)[None, None]
    lvl1 = img[:, :, :, ::2, ::2].copy()
    g = zarr.open_group(path, mode="w", zarr_format=3)
    for p, data in [("0", img), ("1", lvl1)]:
        z = g.create_array(p, shape=data.shape, chunks=(1, 1) + CHUNKS, dtype="int16", compressors=ZstdCodec(), fill_value=0,
                           dimension_names=["t", "c", "z", "y", "x"])
        z[...] = data
    g.attrs["ome"] = {"version": "0.5", "multiscales": [{
        "name": "img",
        "axes": [{"name": "t", "type": "time"}, {"name": "c", "type": "channel"},
                 {"name": "z", "type": "space", "unit": "millimeter"}, {"name": "y", "type": "space", "unit": "millimeter"},
                 {"name": "x", "type": "space", "unit": "millimeter"}],
        "datasets": [
            {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1, 1.5, 0.5, 0.5]},
                                                       {"type": "translation", "translation": [0, 0, -3, 4, 5]}]},
            {"path": "1", "coordinateTransformations": [{"type": "scale", "scale": [1, 1, 1.5, 1.0, 1.0]},
                                                       {"type": "translation", "translation": [0, 0, -3, 4.25, 5.25]}]}],
        "coordinateTransformations": [{"type": "scale", "scale": [1, 1, 2, 2, 2]}],
    }]}
    expect(path, img, "int16", spacing=(3, 1, 1), origin=(-6, 8, 10), levels=2)
    expect(path + "/1", lvl1, "int16", spacing=(3, 2, 2), origin=(-6, 8.5, 10.5))

    bench = os.environ.get("BENCH")
    if bench:
        b = (np.random.default_rng(0).integers(0, 4, size=(256, 256, 256)) * 60).astype("uint8")
        zarr.create_array(store=os.path.join(bench, "bench.zarr"), shape=b.shape, chunks=(64, 64, 64), dtype="uint8",
                          compressors=BloscCodec(cname="zstd", clevel=3, shuffle="shuffle"), zarr_format=3,
                          overwrite=True)[...] = b


if __name__ == "__main__":
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    v2() if MAJOR == 2 else v3()
    with open(f"expected_v{MAJOR}.json", "w") as f:
        json.dump({"zarr_python": zarr.__version__, "fixtures": EXPECTED}, f, indent=1)
    print(len(EXPECTED), "fixtures")
