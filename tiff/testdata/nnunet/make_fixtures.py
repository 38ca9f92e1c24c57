"""Writes the nnU-Net sidecar fixtures and expected.json.

Run from this directory with tifffile and numpy installed
(python3 -m venv /tmp/venv-tw && /tmp/venv-tw/bin/pip install tifffile numpy).

nnU-Net v2's Tiff3DIO keeps a case's spacing in a JSON file beside its TIFF,
in the axis order of the array tifffile returns (pages, rows, columns):

- case_001.tif + case_001.json: a label map written exactly as
  Tiff3DIO.write_seg writes a prediction: tifffile.imwrite(out,
  seg.astype(uint8), compression='zlib'), then save_json({'spacing': ...})
  (batchgenerators' save_json: json.dump(sort_keys=True, indent=4)) to
  OUTSTEM.json.
- case_002_0000.tif + case_002.json: an image, channel 0000 of case_002,
  whose sidecar drops the channel suffix. The TIFF also carries ImageJ
  metadata with another spacing (and a unit): nnU-Net ignores it and reads
  the sidecar, and so must voxtrain.

expected.json holds what the voxtrain reader must read (the schema of
../expected.json): shape and voxels as tifffile reads them, the spacing from
the sidecar, the affine its diagonal.
"""
import hashlib
import json

import numpy as np
import tifffile


def save_json(obj, path):
    # As batchgenerators.utilities.file_and_folder_operations.save_json.
    with open(path, "w") as f:
        json.dump(obj, f, sort_keys=True, indent=4)


def write_seg(seg, out, spacing):
    # As nnunetv2.imageio.tif_reader_writer.Tiff3DIO.write_seg.
    tifffile.imwrite(out, data=seg.astype(np.uint8, copy=False), compression="zlib")
    ending = out.split(".")[-1]
    save_json({"spacing": spacing}, out[: -(len(ending) + 1)] + ".json")


def expected(name, sidecar):
    a = tifffile.imread(name)
    with open(sidecar) as f:
        spacing = [float(s) for s in json.load(f)["spacing"]]
    v = np.ascontiguousarray(a[None], dtype="<f4")
    return {"file": name, "tool": f"tifffile {tifffile.__version__}, spacing from {sidecar}",
            "shape": list(a.shape), "channels": 1, "spacing": spacing,
            "affine": np.diag([spacing[2], spacing[1], spacing[0], 1.0]).tolist(), "dtype": str(a.dtype),
            "sha256_f32le": hashlib.sha256(v.tobytes()).hexdigest(), "sum": float(v.astype(np.float64).sum()),
            "first": v.ravel()[:5].tolist()}


def main():
    # Not 3 or 4 planes: tifffile takes a (3|4, H, W) array without
    # photometric= for a planar RGB(A) image, as write_seg passes none.
    d, h, w = 6, 9, 11
    z, y, x = np.meshgrid(np.arange(d), np.arange(h), np.arange(w), indexing="ij")
    seg = ((x + 2 * y + 3 * z) % 5).astype(np.int64)  # nnU-Net's predictions are int arrays
    write_seg(seg, "case_001.tif", [2.5, 0.75, 0.5])

    img = ((x * 7 + y * 3 + z * 11) % 251).astype(np.float32) - 20.5
    tifffile.imwrite("case_002_0000.tif", img, imagej=True, resolution=(1 / 0.3, 1 / 0.3),
                     metadata={"spacing": 9.0, "unit": "um", "axes": "ZYX"})
    save_json({"spacing": [3.0, 1.25, 1.5]}, "case_002.json")

    out = [expected("case_001.tif", "case_001.json"), expected("case_002_0000.tif", "case_002.json")]
    with open("expected.json", "w") as f:
        json.dump({"files": out}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
