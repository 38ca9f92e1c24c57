"""Writes the COSEM / OpenOrganelle N5 fixtures of package zarr.

OpenOrganelle (Janelia COSEM / CellMap) publishes its EM volumes as N5
multiscale groups in the layout cellmap-schemas models
(cellmap_schemas.multiscale.cosem): each scale level array (s0, s1, ...)
has a "transform" attribute {"axes", "order", "scale", "translate",
"units"} beside Neuroglancer's "pixelResolution", and the group above them
a "multiscales" attribute [{"name", "datasets": [{"path", "transform"}]}]
beside Neuroglancer's "axes", "units", "scales" and "pixelResolution".
This script writes such groups with cellmap-schemas' own Group.from_arrays
(which validates them) through zarr-python 2's N5FSStore, so the metadata
is exactly what the reference tool writes (pydantic-zarr before 0.8, the
last that writes through zarr-python 2, which has the N5 store):

    python3 -m venv /tmp/venv-cosem
    /tmp/venv-cosem/bin/pip install "cellmap-schemas==0.8.1" "pydantic-zarr<0.8" "zarr<3"
    cd zarr/testdata/cosem && /tmp/venv-cosem/bin/python make_fixtures.py

It writes tiny.n5 (a container as OpenOrganelle lays it out):

    tiny.n5/em/fibsem-uint8      levels s0, s1, s2, transform order "C"
                                 (axes z, y, x; what OpenOrganelle has)
    tiny.n5/em/fibsem-uint8-f    the same voxels, transform order "F"
                                 (axes x, y, z: the lists in N5's order)

and expected.json: per group its levels with (D, H, W) shape, spacing
and origin (z, y, x, in the transform's unit), the normalised unit, and
the sha256 of the voxels as float32 little-endian in (D, H, W) C order.

s0 is 6 x 8 x 10 voxels (z, y, x; every axis a different length, so a
transposed read shows), anisotropic (5.24 x 4 x 3 nm, as FIB-SEM's z
differs) with a translation; s1 and s2 are 2x windowed means of the level
above (xarray-multiscale's windowed_mean, as fibsem-tools builds
pyramids: the window's mean, the axis trimmed to a multiple of 2), their
transforms scaled by 2 and translated by half the window (the centre of
the window's first voxels), as fibsem-tools' multiscale writes them.
Chunks are 4 x 4 x 4 (edge chunks partial), gzip as OpenOrganelle's.
"""
import hashlib
import json
import os
import shutil
from importlib.metadata import version

import numpy as np
import zarr
from cellmap_schemas.multiscale.cosem import Group, STTransform
from cellmap_schemas.n5_wrap import n5_spec_wrapper
from numcodecs import GZip
from zarr.n5 import N5FSStore

SHAPE = (6, 8, 10)  # z, y, x
SCALE = (5.24, 4.0, 3.0)  # nm, z, y, x
TRANSLATE = (10.0, 20.0, 30.0)
LEVELS = 3


def windowed_mean(a):
    # xarray-multiscale's windowed_mean with window 2: trim, then mean.
    t = a[tuple(slice(0, (n // 2) * 2) for n in a.shape)]
    z, y, x = t.shape
    return t.reshape(z // 2, 2, y // 2, 2, x // 2, 2).mean(axis=(1, 3, 5))


def checksum(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


def pyramid():
    z, y, x = np.meshgrid(*[np.arange(n) for n in SHAPE], indexing="ij")
    s0 = ((z * 41 + y * 13 + x * 3) % 251).astype("uint8")
    arrays, transforms = [s0], []
    for _ in range(1, LEVELS):
        arrays.append(windowed_mean(arrays[-1].astype("float64")).astype("uint8"))
    for k in range(LEVELS):
        f = 2**k
        scale = tuple(s * f for s in SCALE)
        # The centre of the first window of f voxels of s0.
        translate = tuple(t + s * (f - 1) / 2 for t, s in zip(TRANSLATE, SCALE))
        transforms.append((scale, translate))
    return arrays, transforms


def write_group(root, path, arrays, transforms, order):
    txs = []
    for scale, translate in transforms:
        if order == "C":
            txs.append(STTransform(order="C", axes=("z", "y", "x"), units=("nm",) * 3, scale=scale, translate=translate))
        else:
            txs.append(STTransform(order="F", axes=("x", "y", "z"), units=("nm",) * 3,
                                   scale=scale[::-1], translate=translate[::-1]))
    paths = [f"s{k}" for k in range(len(arrays))]
    spec = Group.from_arrays(arrays=arrays, paths=paths, transforms=txs, name=path.split("/")[-1],
                             chunks=(4, 4, 4), compressor=GZip(-1))
    group = n5_spec_wrapper(spec).to_zarr(N5FSStore(root), path=path)
    levels = []
    for p, a, (scale, translate) in zip(paths, arrays, transforms):
        group[p][...] = a
        levels.append({"path": p, "shape": list(a.shape), "spacing": list(scale), "origin": list(translate),
                       "unit": "nanometer", "sha256": checksum(a)})
    # Read back through zarr-python: what the Go reader must match.
    for p, a in zip(paths, arrays):
        back = zarr.open(N5FSStore(root), mode="r")[f"{path}/{p}"][...]
        assert back.shape == a.shape and (back == a).all(), p
    return {"path": f"tiny.n5/{path}", "order": order, "levels": levels}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    os.chdir(here)
    shutil.rmtree("tiny.n5", ignore_errors=True)
    arrays, transforms = pyramid()
    groups = [write_group("tiny.n5", "em/fibsem-uint8", arrays, transforms, "C"),
              write_group("tiny.n5", "em/fibsem-uint8-f", arrays, transforms, "F")]
    doc = {"cellmap_schemas": version("cellmap-schemas"), "pydantic_zarr": version("pydantic-zarr"), "zarr_python": zarr.__version__, "groups": groups}
    with open("expected.json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
