#!/usr/bin/env python3
"""Add the FreeSurfer shape conventions to the NIfTI conformance fixtures.

nibabel writes (and reads back) two FreeSurfer conventions for long 1-D
vectors that do not fit NIfTI-1's int16 dim fields:

  - the ico7 surface: 163842 vertices are stored as dim = (27307, 1, 6);
  - any longer vector: dim[1] = -1 with the length in glmin.

This script writes one file of each with nibabel (the same version as
expected.json, 5.0.0) into synth/ and appends what nibabel reads from them
(make_fixtures.describe) to expected.json. It also writes qfac0.nii, a
header whose pixdim[0] (qfac) is 0 as some writers leave it: nibabel's
load-time check_fix reads it as 1 (5.0.0 and 5.4.2 alike), which is what
`train info --json` must report too. Run once; the outputs are
committed:

  python3 -m venv /tmp/nibvenv
  /tmp/nibvenv/bin/pip install nibabel==5.0.0 'numpy<2'
  /tmp/nibvenv/bin/python nifti/testdata/make_fixtures_freesurfer.py
"""
import json
import os
import struct
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (describe, paths; main() does not run on import)

FILES = {
    # 163842 = 27307 * 6: nibabel stores it as (27307, 1, 6).
    "fs_ico7.nii": (163842, 1, 1),
    # 40000 > 32767: nibabel stores dim[1] = -1 and the length in glmin.
    "fs_glmin.nii": (40000, 1, 1),
}


def qfac0(path):
    """A qform-coded file whose stored pixdim[0] is 0."""
    img = nib.Nifti1Image(np.arange(24, dtype=np.uint8).reshape(2, 3, 4), np.diag([2.0, 3.0, 4.0, 1.0]))
    img.header.set_qform(np.diag([2.0, 3.0, 4.0, 1.0]), code=1)
    nib.save(img, path)
    b = bytearray(open(path, "rb").read())
    b[76:80] = struct.pack("<f", 0.0)
    open(path, "wb").write(bytes(b))


def main():
    if nib.__version__ != "5.0.0":
        sys.exit(f"nibabel {nib.__version__}: expected.json was made with 5.0.0")
    rng = np.random.default_rng(20261126)
    added = []
    for name, shape in FILES.items():
        data = rng.integers(0, 256, size=shape, dtype=np.uint8)
        path = os.path.join(mf.SYNTH, name)
        nib.save(nib.Nifti1Image(data, np.diag([1.0, 1.0, 1.0, 1.0])), path)
        d = mf.describe(path)
        assert tuple(d["shape"]) == shape, (name, d["shape"], d["dim"])
        added.append(d)
    path = os.path.join(mf.SYNTH, "qfac0.nii")
    qfac0(path)
    d = mf.describe(path)
    assert d["pixdim"][0] == 1.0, d["pixdim"]
    added.append(d)
    exp_path = os.path.join(mf.HERE, "expected.json")
    with open(exp_path) as f:
        exp = json.load(f)
    names = set(FILES) | {"qfac0.nii"}
    exp["files"] = [e for e in exp["files"] if os.path.basename(e["file"]) not in names] + added
    with open(exp_path, "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")
    for d in added:
        print(d["file"], "dim", d["dim"][:4], "shape", d["shape"])


if __name__ == "__main__":
    main()
