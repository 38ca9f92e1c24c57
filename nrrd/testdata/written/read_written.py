"""Records what reference tools read from the label maps voxtrain's NRRD
writer wrote here, in expected.json.

The files (labels.nrrd; labels.nhdr with labels.raw.gz) are written by
nrrd.WriteLabels: `go test ./nrrd -run TestWritten -update` rewrites them.
Then run this script from this directory with SimpleITK, pynrrd and numpy
installed (python3 -m venv /tmp/venv-nm && /tmp/venv-nm/bin/pip install
SimpleITK pynrrd numpy). TestWritten checks that today's writer still
writes what is committed here, and that what the tools read below is the
geometry and the voxels the writer was given.

For each file expected.json holds:
  sitk:   SimpleITK's size (x, y, z), spacing, origin and direction
          (row-major, ITK's LPS world), pixel type, and the SHA-256 of
          GetArrayFromImage's bytes ((z, y, x) C order);
  pynrrd: the header fields as pynrrd parses them, the array's shape,
          dtype and SHA-256 (index_order="C");
  itk_header: the header ITK's own NRRD writer writes for an image with
          the geometry and voxels SimpleITK read (no metadata copied), as
          [field, value] pairs in order, comments and key/values left out.
"""
import hashlib
import json
import os
import tempfile

import nrrd
import numpy as np
import SimpleITK as sitk

FILES = ["labels.nrrd", "labels.nhdr"]


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def sitk_read(name):
    img = sitk.ReadImage(name)
    a = sitk.GetArrayFromImage(img)
    return img, {"tool": "SimpleITK " + sitk.Version_VersionString(), "size": list(img.GetSize()),
                 "spacing": list(img.GetSpacing()), "origin": list(img.GetOrigin()),
                 "direction": list(img.GetDirection()), "pixel": img.GetPixelIDTypeAsString(),
                 "dtype": str(a.dtype), "sha256": sha(a)}


def jsonable(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return v


def pynrrd_read(name):
    data, h = nrrd.read(name, index_order="C")
    fields = {k: jsonable(v) for k, v in h.items()}
    return {"tool": "pynrrd " + nrrd.__version__, "shape": list(data.shape), "dtype": str(data.dtype),
            "sha256": sha(data), "fields": fields}


def header_lines(path):
    """The NRRD header's [field, value] pairs, without comments or key/values."""
    out = []
    with open(path, "rb") as f:
        f.readline()  # NRRD000x
        for raw in f:
            line = raw.decode("latin-1").rstrip("\r\n")
            if line == "":
                break
            if line.startswith("#") or (":=" in line and ": " not in line.split(":=")[0]):
                continue
            k, v = line.split(": ", 1)
            out.append([k, v])
    return out


def itk_rewrite(img, name):
    """What ITK's writer writes for img's geometry and voxels under name."""
    clean = sitk.GetImageFromArray(sitk.GetArrayFromImage(img))
    clean.CopyInformation(img)
    with tempfile.TemporaryDirectory() as d:
        sitk.WriteImage(clean, os.path.join(d, name), useCompression=True)
        return header_lines(os.path.join(d, name))


def main():
    out = []
    for name in FILES:
        img, s = sitk_read(name)
        p = pynrrd_read(name)
        assert s["sha256"] == p["sha256"], name
        out.append({"file": name, "sitk": s, "pynrrd": p, "itk_header": itk_rewrite(img, name)})
    with open("expected.json", "w") as f:
        json.dump({"files": out}, f, indent=1)


if __name__ == "__main__":
    main()
