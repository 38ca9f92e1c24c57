"""Writes the MetaImage conformance fixtures and expected.json.

Run from this directory with SimpleITK and numpy installed
(python3 -m venv /tmp/venv-fmt && /tmp/venv-fmt/bin/pip install SimpleITK numpy).
Every file is written by ITK's MetaImage writer (SimpleITK) except
uint16_msb.mhd, a byte-swapped copy of uint16.mhd's data with
BinaryDataByteOrderMSB = True (SimpleITK reads it back identically, which
the script checks). expected.json holds what SimpleITK reads: shape
(D, H, W), channels, spacing (D, H, W), the RAS+ affine, dtype and the
SHA-256 of the voxels as float32 little-endian in (C, D, H, W) C order.

RAS+ from ITK: ITK's world is LPS, world = Origin + Direction @ diag(Spacing)
@ (x, y, z); RAS+ = diag(-1, -1, 1) @ that (L->R, P->A).
"""
import hashlib
import json

import numpy as np
import SimpleITK as sitk

SHAPE = (5, 6, 7)  # (D, H, W)
OBLIQUE = np.array([[0.9, 0.1, 0.0], [-0.1, 0.9, 0.2], [0.0, -0.2, 1.1]])
DIRECTION = (OBLIQUE / np.linalg.norm(OBLIQUE, axis=1)[:, None]).T  # columns: x, y, z axes


def values(dtype, shape=SHAPE, seed=0):
    n = int(np.prod(shape))
    v = (np.arange(n) * 7 + seed) % 251
    if np.dtype(dtype).kind == "i":
        v = v - 100
    if np.dtype(dtype).kind == "f":
        v = v * 0.5 - 20.25
    return v.astype(dtype).reshape(shape)


def expected(name):
    img = sitk.ReadImage(name)
    a = sitk.GetArrayFromImage(img)
    cdhw = np.moveaxis(a, -1, 0) if img.GetNumberOfComponentsPerPixel() > 1 else a[None]
    d = np.array(img.GetDirection()).reshape(3, 3)
    sp = np.array(img.GetSpacing())
    lps = np.eye(4)
    lps[:3, :3] = d @ np.diag(sp)
    lps[:3, 3] = img.GetOrigin()
    ras = np.diag([-1, -1, 1, 1]) @ lps
    f = np.ascontiguousarray(cdhw, dtype="<f4")
    return {"file": name, "tool": "SimpleITK " + sitk.Version_VersionString(), "shape": list(cdhw.shape[1:]),
            "channels": int(cdhw.shape[0]), "spacing": sp[::-1].tolist(), "affine": ras.tolist(),
            "dtype": str(a.dtype), "sha256_f32le": hashlib.sha256(f.tobytes()).hexdigest(),
            "sum": float(f.astype(np.float64).sum()), "first": f.ravel()[:5].tolist()}


def image(arr, vector=False):
    img = sitk.GetImageFromArray(arr, isVector=vector)
    img.SetSpacing((1.2, 0.8, 2.5))
    img.SetOrigin((10.5, -20.0, 30.25))
    img.SetDirection(tuple(DIRECTION.ravel()))
    return img


def main():
    out = []
    for i, dt in enumerate(["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"]):
        name = f"{np.dtype(dt).name}.{'mha' if i % 2 == 0 else 'mhd'}"
        sitk.WriteImage(image(values(dt)), name, useCompression=False)
        out.append(expected(name))
        zname = f"{np.dtype(dt).name}_zlib.{'mhd' if i % 2 == 0 else 'mha'}"
        sitk.WriteImage(image(values(dt, seed=3)), zname, useCompression=True)
        out.append(expected(zname))
    vec = np.stack([values("f4", seed=s) for s in range(3)], axis=-1)
    sitk.WriteImage(image(vec, vector=True), "float32_3channels.mha", useCompression=False)
    sitk.WriteImage(image(vec, vector=True), "float32_3channels_zlib.mhd", useCompression=True)
    out += [expected("float32_3channels.mha"), expected("float32_3channels_zlib.mhd")]
    lab = (np.arange(np.prod(SHAPE)) % 3).astype("u1").reshape(SHAPE)
    sitk.WriteImage(image(lab), "labels_uint8.mha")
    out.append(expected("labels_uint8.mha"))
    # Big-endian: uint16.mhd's header with the MSB flag and swapped data.
    hdr = open("uint16.mhd").read().replace("BinaryDataByteOrderMSB = False", "BinaryDataByteOrderMSB = True")
    open("uint16_msb.mhd", "w").write(hdr.replace("uint16.raw", "uint16_msb.raw"))
    np.fromfile("uint16.raw", "<u2").astype(">u2").tofile("uint16_msb.raw")
    assert (sitk.GetArrayFromImage(sitk.ReadImage("uint16_msb.mhd")) == values("u2")).all()
    out.append(expected("uint16_msb.mhd"))
    with open("expected.json", "w") as f:
        json.dump({"files": out}, f, indent=1)


if __name__ == "__main__":
    main()
