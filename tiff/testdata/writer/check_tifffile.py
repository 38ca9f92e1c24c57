"""Reads the label maps voxtrain's TIFF writer wrote here (regenerate them
with `go test ./tiff -run TestWriterConformance -update`) with tifffile and
records in tifffile.json what it read; TestWriterConformance compares that
with the header and labels voxtrain wrote.

Run from this directory with tifffile and numpy installed
(python3 -m venv /tmp/venv-tw && /tmp/venv-tw/bin/pip install tifffile numpy).

Recorded per file: tifffile's warnings and log messages (none expected),
is_bigtiff, is_imagej, the page count, the array's shape, axes and dtype,
the first page's Compression, Predictor, Photometric, RowsPerStrip,
X/YResolution (numerator, denominator), ResolutionUnit, imagej_metadata's
spacing, unit and slices, the SHA-256 of the array (uint8, C order), and the
spacing of the nnU-Net sidecar STEM.json (null when absent), read as nnU-Net's
Tiff3DIO reads it.
"""
import glob
import hashlib
import json
import logging
import os
import warnings

import numpy as np
import tifffile


class Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def record(name):
    log = Collect()
    logging.getLogger("tifffile").addHandler(log)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tifffile.TiffFile(name) as tif:
            a = tif.asarray()
            page = tif.pages[0]
            ij = tif.imagej_metadata or {}
            series = tif.series[0]
            out = {
                "file": name,
                "tool": f"tifffile {tifffile.__version__}, numpy {np.__version__}",
                "is_bigtiff": tif.is_bigtiff,
                "is_imagej": tif.is_imagej,
                "pages": len(tif.pages),
                "shape": list(a.shape),
                "axes": series.axes,
                "dtype": str(a.dtype),
                "compression": int(page.compression),
                "predictor": int(page.predictor),
                "photometric": int(page.photometric),
                "rowsperstrip": int(page.rowsperstrip),
                "x_resolution": list(page.tags["XResolution"].value),
                "y_resolution": list(page.tags["YResolution"].value),
                "resolution_unit": int(page.tags["ResolutionUnit"].value),
                "imagej_spacing": float(ij["spacing"]) if "spacing" in ij else None,
                "imagej_unit": ij.get("unit"),
                "imagej_slices": int(ij.get("slices", 0)),
                "sha256_uint8": hashlib.sha256(np.ascontiguousarray(a, dtype=np.uint8).tobytes()).hexdigest(),
            }
    logging.getLogger("tifffile").removeHandler(log)
    out["warnings"] = [str(w.message) for w in caught] + log.messages
    sidecar = name[: -len(name.split(".")[-1]) - 1] + ".json"
    out["sidecar_spacing"] = None
    if os.path.isfile(sidecar):
        with open(sidecar) as f:
            spacing = json.load(f)["spacing"]
        assert len(spacing) == 3
        out["sidecar_spacing"] = [float(s) for s in spacing]
    return out


def main():
    files = sorted(glob.glob("*.tif"))
    with open("tifffile.json", "w") as f:
        json.dump({"files": [record(n) for n in files]}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
