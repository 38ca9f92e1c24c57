"""Writes the TIFF conformance fixtures and expected.json (stacks, and
folders of 2-D slices read as one volume).

Run from this directory with tifffile, imagecodecs and numpy installed
(python3 -m venv /tmp/venv-fmt && /tmp/venv-fmt/bin/pip install tifffile imagecodecs numpy).
Every file is written by tifffile and read back by it. expected.json holds
what tifffile reads: shape (D, H, W) with D = pages (per channel), channels,
spacing (D, H, W), the affine (the diagonal of the spacing: a TIFF has no
orientation), dtype and the SHA-256 of the voxels as float32 little-endian
in (C, D, H, W) C order. Spacing: ImageJ files give X and Y as
1/XResolution and 1/YResolution and Z as `spacing=` in the ImageJ
description; OME-TIFF gives PhysicalSizeX/Y/Z; a plain TIFF gives 1.
"""
import glob
import hashlib
import json
import os
import re

import numpy as np
import tifffile

SHAPE = (5, 6, 7)


def values(dtype, shape=SHAPE, seed=0):
    n = int(np.prod(shape))
    v = (np.arange(n) * 7 + seed) % 251
    if np.dtype(dtype).kind == "i":
        v = v - 100
    if np.dtype(dtype).kind == "f":
        v = v * 0.5 - 20.25
    return v.astype(dtype).reshape(shape)


def expected(name):
    with tifffile.TiffFile(name) as tif:
        a = tif.asarray()
        page = tif.pages[0]
        spacing = [1.0, 1.0, 1.0]
        if tif.is_imagej:
            ij = tif.imagej_metadata
            x, y = page.tags["XResolution"].value, page.tags["YResolution"].value
            spacing = [float(ij.get("spacing", 1.0)), y[1] / y[0], x[1] / x[0]]
            axes = tif.series[0].axes
        elif tif.is_ome:
            xml = tif.ome_metadata
            for i, k in enumerate("ZYX"):
                m = re.search(f'PhysicalSize{k}="([^"]+)"', xml)
                if m:
                    spacing[i] = float(m.group(1))
            axes = tif.series[0].axes
        else:
            axes = tif.series[0].axes
    # To (C, D, H, W).
    if "C" in axes and a.ndim == 4:
        cdhw = np.moveaxis(a, axes.index("C"), 0)
    elif "S" in axes:
        cdhw = np.moveaxis(a, axes.index("S"), 0)
    else:
        cdhw = a[None] if a.ndim == 3 else a[None, None]
    f = np.ascontiguousarray(cdhw, dtype="<f4")
    return {"file": name, "tool": f"tifffile {tifffile.__version__} (axes {axes})", "shape": list(cdhw.shape[1:]),
            "channels": int(cdhw.shape[0]), "spacing": spacing,
            "affine": np.diag([spacing[2], spacing[1], spacing[0], 1.0]).tolist(), "dtype": str(a.dtype),
            "sha256_f32le": hashlib.sha256(f.tobytes()).hexdigest(), "sum": float(f.astype(np.float64).sum()),
            "first": f.ravel()[:5].tolist()}


def folder(name, files, data, **kw):
    """Writes data's planes as the 2-D TIFF files of folder name."""
    os.makedirs(name, exist_ok=True)
    for f in os.listdir(name):
        os.remove(os.path.join(name, f))
    if not kw.get("imagej"):
        kw["photometric"] = "minisblack"
    for f, plane in zip(files, data):
        tifffile.imwrite(os.path.join(name, f), plane, **kw)


def expected_folder(name):
    """What tifffile reads from a folder of slices: the files in tifffile's
    natural order stacked along D; spacing from the first slice (ImageJ
    resolution and spacing=, else 1)."""
    files = tifffile.natural_sorted(glob.glob(os.path.join(name, "*.tif")))
    a = np.stack([tifffile.imread(f) for f in files])
    spacing = [1.0, 1.0, 1.0]
    with tifffile.TiffFile(files[0]) as tif:
        if tif.is_imagej:
            page = tif.pages[0]
            x, y = page.tags["XResolution"].value, page.tags["YResolution"].value
            spacing = [float(tif.imagej_metadata.get("spacing", 1.0)), y[1] / y[0], x[1] / x[0]]
    f = np.ascontiguousarray(a[None], dtype="<f4")
    return {"file": name, "tool": f"tifffile {tifffile.__version__} (natural_sorted, {len(files)} files)",
            "shape": list(a.shape), "channels": 1, "spacing": spacing,
            "affine": np.diag([spacing[2], spacing[1], spacing[0], 1.0]).tolist(), "dtype": str(a.dtype),
            "sha256_f32le": hashlib.sha256(f.tobytes()).hexdigest(), "sum": float(f.astype(np.float64).sum()),
            "first": f.ravel()[:5].tolist()}


def main():
    out = []

    def w(name, data, **kw):
        if "photometric" not in kw and not kw.get("imagej"):
            kw["photometric"] = "minisblack"  # pages of planes, never a guessed RGB image
        tifffile.imwrite(name, data, **kw)

    for dt in ["u1", "i1", "u2", "i2", "u4", "i4", "f4", "f8"]:
        name = f"stack_{np.dtype(dt).name}.tif"
        w(name, values(dt))
        out.append(expected(name))
    w("stack_uint16_be.tif", values("u2"), byteorder=">")
    w("bigtiff_int16.tif", values("i2"), bigtiff=True)
    w("bigtiff_float32_be_zlib.tif", values("f4"), bigtiff=True, byteorder=">", compression="zlib")
    big = (4, 20, 35)  # several strips and tiles per page
    w("strips_uint16.tif", values("u2", big), rowsperstrip=3)
    w("tiled_int16.tif", values("i2", big), tile=(16, 16))
    w("tiled_uint16_lzw_pred.tif", values("u2", big), tile=(16, 16), compression="lzw", predictor=True)
    w("tiled_bigtiff_uint8_deflate.tif", values("u1", big), tile=(16, 16), bigtiff=True, compression="deflate")
    for comp in ["zlib", "deflate", "lzw", "packbits", "zstd"]:
        w(f"comp_{comp}_uint16.tif", values("u2", big), compression=comp, rowsperstrip=4)
        out.append(expected(f"comp_{comp}_uint16.tif"))
    w("lzw_pred_int16_be.tif", values("i2", big), compression="lzw", predictor=True, byteorder=">", rowsperstrip=5)
    w("zlib_pred_uint32.tif", values("u4", big), compression="zlib", predictor=True)
    w("zlib_pred_float32.tif", values("f4", big), compression="zlib", predictor=True)
    w("lzw_pred_float32_be.tif", values("f4", big), compression="lzw", predictor=True, byteorder=">")
    w("lzw_pred_uint8.tif", values("u1", big), compression="lzw", predictor=True)
    for n in ["stack_uint16_be.tif", "bigtiff_int16.tif", "bigtiff_float32_be_zlib.tif", "strips_uint16.tif",
              "tiled_int16.tif", "tiled_uint16_lzw_pred.tif", "tiled_bigtiff_uint8_deflate.tif",
              "lzw_pred_int16_be.tif", "zlib_pred_uint32.tif", "zlib_pred_float32.tif",
              "lzw_pred_float32_be.tif", "lzw_pred_uint8.tif"]:
        out.append(expected(n))
    # ImageJ: voxel size in the resolution tags and the description.
    w("imagej_uint16.tif", values("u2"), imagej=True, resolution=(1 / 0.5, 1 / 0.25),
      metadata={"spacing": 2.5, "unit": "um", "axes": "ZYX"})
    zc = np.stack([values("u1", seed=s) for s in range(2)], axis=1)  # (Z, C, Y, X)
    w("imagej_2channels_uint8.tif", zc, imagej=True, resolution=(1 / 0.3, 1 / 0.3),
      metadata={"spacing": 1.5, "unit": "um", "axes": "ZCYX"})
    # OME-TIFF: PhysicalSize in the XML.
    w("ome_float32.ome.tif", values("f4"), ome=True,
      metadata={"axes": "ZYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.75, "PhysicalSizeZ": 2.0})
    cz = np.stack([values("i2", seed=s) for s in range(3)], axis=0)  # (C, Z, Y, X)
    w("ome_3channels_int16.ome.tif", cz, ome=True,
      metadata={"axes": "CZYX", "PhysicalSizeX": 0.4, "PhysicalSizeY": 0.4, "PhysicalSizeZ": 1.2})
    # RGB pixels: three samples per pixel are the channels.
    w("rgb_uint8.tif", np.stack([values("u1", seed=s) for s in range(3)], axis=-1), photometric="rgb")
    lab = (np.arange(np.prod(SHAPE)) % 3).astype("u1").reshape(SHAPE)
    w("labels_uint8.tif", lab, compression="zlib")
    for n in ["imagej_uint16.tif", "imagej_2channels_uint8.tif", "ome_float32.ome.tif",
              "ome_3channels_int16.ome.tif", "rgb_uint8.tif", "labels_uint8.tif"]:
        out.append(expected(n))
    # Folders of 2-D slices, one volume each: the files in natural order
    # (slice2 before slice10) are the planes.
    folder("slices_uint16", [f"slice{i}.tif" for i in range(1, 12)], values("u2", (11, 20, 35)), rowsperstrip=3)
    out.append(expected_folder("slices_uint16"))
    # Vesuvius-style names (00.tif …), ImageJ spacing, tiled and compressed.
    folder("slices_imagej_float32", [f"{i:02d}.tif" for i in range(6)], values("f4", (6, 20, 35)), imagej=True,
           resolution=(1 / 0.5, 1 / 0.25), metadata={"spacing": 2.0, "unit": "um", "axes": "YX"},
           tile=(16, 16), compression="zlib")
    out.append(expected_folder("slices_imagej_float32"))
    with open("expected.json", "w") as f:
        json.dump({"files": out}, f, indent=1)


if __name__ == "__main__":
    main()
