"""Writes the NRRD conformance fixtures and expected.json.

Run from this directory with pynrrd, SimpleITK and numpy installed
(python3 -m venv /tmp/venv-fmt && /tmp/venv-fmt/bin/pip install pynrrd SimpleITK numpy).
Each file is written by a reference tool and read back by it; expected.json
holds what the tool reads: shape (D, H, W), channels, spacing (D, H, W), the
RAS+ affine, dtype and the SHA-256 of the voxels as float32 little-endian in
(C, D, H, W) C order.

RAS+ from NRRD: world = origin + sum_k index_k * direction_k in the file's
`space`; for left-posterior-superior (LPS, ITK's frame) the first two world
coordinates are negated (L->R, P->A), for left-anterior-superior the first.
"""
import hashlib
import json

import nrrd
import numpy as np
import SimpleITK as sitk

SHAPE = (5, 6, 7)  # (D, H, W)
OBLIQUE = np.array([[0.9, 0.1, 0.0], [-0.1, 0.9, 0.2], [0.0, -0.2, 1.1]])  # rows: x, y, z axes
SIGNS = {"left-posterior-superior": [-1, -1, 1], "right-anterior-superior": [1, 1, 1],
         "left-anterior-superior": [-1, 1, 1]}


def values(dtype, shape=SHAPE, seed=0):
    n = int(np.prod(shape))
    v = (np.arange(n) * 7 + seed) % 251
    if np.dtype(dtype).kind == "i":
        v = v - 100
    if np.dtype(dtype).kind == "f":
        v = v * 0.5 - 20.25
    return v.astype(dtype).reshape(shape)


def checksum(cdhw):
    a = np.ascontiguousarray(cdhw, dtype="<f4")
    return hashlib.sha256(a.tobytes()).hexdigest(), float(a.astype(np.float64).sum()), a.ravel()[:5].tolist()


def entry(name, tool, cdhw, spacing, affine, dtype):
    sha, s, first = checksum(cdhw)
    return {"file": name, "tool": tool, "shape": list(cdhw.shape[1:]), "channels": int(cdhw.shape[0]),
            "spacing": [float(x) for x in spacing], "affine": np.asarray(affine, float).tolist(),
            "dtype": str(np.dtype(dtype)), "sha256_f32le": sha, "sum": s, "first": first}


def pynrrd_expected(name):
    """What pynrrd reads, and the RAS+ affine derived from its header."""
    data, h = nrrd.read(name, index_order="C")
    dim = h["dimension"]
    kinds = h.get("kinds", ["domain"] * dim)
    dirs = h.get("space directions")
    ch = None
    if dim == 4:
        ch = [i for i, d in enumerate(dirs) if d is None or np.all(np.isnan(d))][0] if dirs is not None else 3
    spatial = [i for i in range(dim) if i != ch]  # NRRD axes, fastest first
    if dirs is not None:
        vec = np.array([dirs[i] for i in spatial], float)  # rows: x, y, z axes
    else:
        sp = h.get("spacings", [1.0] * dim)
        vec = np.diag([sp[i] for i in spatial])
    origin = np.array(h.get("space origin", [0, 0, 0]), float)
    signs = np.array(SIGNS.get(h.get("space", "right-anterior-superior")))
    aff = np.eye(4)
    aff[:3, :3] = (signs[:, None] * vec.T)
    aff[:3, 3] = signs * origin
    spacing = np.linalg.norm(vec, axis=1)[::-1]
    # data in C order is the NRRD axes reversed: (D, H, W) or with channels.
    if ch is None:
        cdhw = data[None]
    elif ch == 0:
        cdhw = np.moveaxis(data, -1, 0)
    else:
        cdhw = data
    return entry(name, "pynrrd " + nrrd.__version__, cdhw, spacing, aff, data.dtype)


def sitk_expected(name):
    img = sitk.ReadImage(name)
    a = sitk.GetArrayFromImage(img)
    if img.GetNumberOfComponentsPerPixel() > 1:
        cdhw = np.moveaxis(a, -1, 0)
    else:
        cdhw = a[None]
    d = np.array(img.GetDirection()).reshape(3, 3)
    sp = np.array(img.GetSpacing())
    lps = np.eye(4)
    lps[:3, :3] = d @ np.diag(sp)
    lps[:3, 3] = img.GetOrigin()
    ras = np.diag([-1, -1, 1, 1]) @ lps
    return entry(name, "SimpleITK " + sitk.Version_VersionString(), cdhw, sp[::-1], ras, a.dtype)


def main():
    out = []
    lps = {"space": "left-posterior-superior", "space directions": OBLIQUE * [[1.2], [0.8], [2.5]],
           "space origin": np.array([10.5, -20.0, 30.25])}
    cases = [  # name, dtype, header options, write options
        ("int8_raw.nrrd", "i1", {}, {}),
        ("uint8_gzip.nrrd", "u1", {**lps}, {}),
        ("int16_raw_lps.nrrd", "i2", {**lps, "encoding": "raw"}, {}),
        ("uint16_bzip2_be.nrrd", ">u2", {**lps, "encoding": "bzip2"}, {}),
        ("int32_ascii.nrrd", "i4", {"encoding": "ascii", "spacings": [0.5, 1.5, 3.0]}, {}),
        ("uint32_gzip_be.nrrd", ">u4", {"space": "right-anterior-superior",
                                       "space directions": np.diag([2.0, 3.0, 4.0]),
                                       "space origin": np.array([1.0, 2.0, 3.0])}, {}),
        ("int64_raw.nrrd", "i8", {**lps, "encoding": "raw"}, {}),
        ("uint64_gzip.nrrd", "u8", {"space": "left-anterior-superior",
                                   "space directions": np.diag([0.7, 0.8, 0.9]),
                                   "space origin": np.array([-1.0, -2.0, -3.0])}, {}),
        ("float32_raw_be.nrrd", ">f4", {**lps, "encoding": "raw"}, {}),
        ("float64_gzip.nrrd", "f8", {**lps}, {}),
        ("int16_detached.nhdr", "i2", {**lps, "encoding": "raw"}, {"detached_header": True}),
        ("float32_gzip_detached.nhdr", "f4", {**lps, "encoding": "gzip"}, {"detached_header": True}),
    ]
    for name, dt, hdr, opts in cases:
        nrrd.write(name, values(dt), dict(hdr), index_order="C", **opts)
        out.append(pynrrd_expected(name))
    # 4-D: three channels interleaved (a vector axis first in the file),
    # and two channels as the last, slowest axis (a list).
    vec = np.stack([values("f4", seed=s) for s in range(3)], axis=-1)  # (D, H, W, C)
    nrrd.write("float32_vector.nrrd", vec, {"kinds": ["vector", "domain", "domain", "domain"],
                                            "space": "left-posterior-superior",
                                            "space directions": np.vstack([[np.nan] * 3, lps["space directions"]]),
                                            "space origin": lps["space origin"], "encoding": "gzip"},
               index_order="C")
    out.append(pynrrd_expected("float32_vector.nrrd"))
    lst = np.stack([values("i2", seed=s) for s in range(2)], axis=0)  # (C, D, H, W)
    nrrd.write("int16_list.nrrd", lst, {"kinds": ["domain", "domain", "domain", "list"],
                                        "space": "left-posterior-superior",
                                        "space directions": np.vstack([lps["space directions"], [np.nan] * 3]),
                                        "space origin": lps["space origin"], "encoding": "raw"},
               index_order="C")
    out.append(pynrrd_expected("int16_list.nrrd"))
    # A label map as the pipeline reads them.
    lab = (np.arange(np.prod(SHAPE)) % 3).astype("u1").reshape(SHAPE)
    nrrd.write("labels_uint8.nrrd", lab, {**lps}, index_order="C")
    out.append(pynrrd_expected("labels_uint8.nrrd"))
    # Written by ITK (SimpleITK), oblique, compressed and not.
    img = sitk.GetImageFromArray(values("i2"))
    img.SetSpacing((1.2, 0.8, 2.5))
    img.SetOrigin((10.5, -20.0, 30.25))
    img.SetDirection(tuple((OBLIQUE / np.linalg.norm(OBLIQUE, axis=1)[:, None]).T.ravel()))
    sitk.WriteImage(img, "sitk_int16.nrrd", useCompression=False)
    sitk.WriteImage(img, "sitk_int16_gzip.nrrd", useCompression=True)
    out += [sitk_expected("sitk_int16.nrrd"), sitk_expected("sitk_int16_gzip.nrrd")]
    with open("expected.json", "w") as f:
        json.dump({"files": out}, f, indent=1)


if __name__ == "__main__":
    main()
