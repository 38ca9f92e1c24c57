"""Records what SimpleITK reads from the label maps voxtrain's MetaImage
writer wrote here, and how ITK names orientations, in expected.json.

The files (labels.mha; labels.mhd with labels.zraw) are written by
metaimage.WriteLabels: `go test ./metaimage -run TestWritten -update`
rewrites them. Then run this script from this directory with SimpleITK and
numpy installed (python3 -m venv /tmp/venv-nm && /tmp/venv-nm/bin/pip
install SimpleITK numpy). TestWritten checks that today's writer still
writes what is committed here, and that what SimpleITK read below is the
geometry (in millimetres: the files were written from a header in
micrometres) and the voxels the writer was given.

expected.json holds, per file:
  sitk:   SimpleITK's size (x, y, z), spacing, origin and direction
          (row-major, ITK's LPS world), pixel type, and the SHA-256 of
          GetArrayFromImage's bytes ((z, y, x) C order);
  itk_header: the header ITK's own MetaImage writer writes for an image
          with the geometry and voxels SimpleITK read (no metadata
          copied), as [key, value] pairs in order;
and "orientations": direction matrices (row-major, as SetDirection takes
them) with the AnatomicalOrientation ITK writes for each: every signed
permutation, random rotations, and rotations whose equal largest cosines
(45 degrees; thirds) exercise ITK's tie-breaking
(TestAnatomicalOrientation).
"""
import hashlib
import itertools
import json
import os
import tempfile

import numpy as np
import SimpleITK as sitk

FILES = ["labels.mha", "labels.mhd"]


def sitk_read(name):
    img = sitk.ReadImage(name)
    a = sitk.GetArrayFromImage(img)
    return img, {"tool": "SimpleITK " + sitk.Version_VersionString(), "size": list(img.GetSize()),
                 "spacing": list(img.GetSpacing()), "origin": list(img.GetOrigin()),
                 "direction": list(img.GetDirection()), "pixel": img.GetPixelIDTypeAsString(),
                 "dtype": str(a.dtype), "sha256": hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()}


def header_lines(path):
    out = []
    with open(path, "rb") as f:
        for raw in f:
            k, v = raw.decode("latin-1").split("=", 1)
            out.append([k.strip(), v.strip()])
            if k.strip() == "ElementDataFile":
                break
    return out


def itk_write(img, name):
    """The header ITK's writer writes for img's geometry and voxels."""
    with tempfile.TemporaryDirectory() as d:
        sitk.WriteImage(img, os.path.join(d, name), useCompression=True)
        return header_lines(os.path.join(d, name))


def clean(img):
    c = sitk.GetImageFromArray(sitk.GetArrayFromImage(img))
    c.CopyInformation(img)
    return c


def orientations():
    cases = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product([1, -1], repeat=3):
            d = np.zeros((3, 3))
            for k in range(3):
                d[perm[k], k] = signs[k]
            cases.append(d)
    rng = np.random.default_rng(7)
    for _ in range(40):
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        cases.append(q)
    c = np.cos(np.pi / 4)
    for m in ([[c, -c, 0], [c, c, 0], [0, 0, 1]], [[c, c, 0], [c, -c, 0], [0, 0, 1]],
              [[1, 0, 0], [0, c, c], [0, -c, c]], [[-c, 0, -c], [0, 1, 0], [-c, 0, c]]):
        cases.append(np.array(m))
    # Rotations whose largest cosines (2/3) tie across rows and columns,
    # so that which tie ITK takes first changes the letters.
    third = np.array([[2, 2, 1], [2, -1, -2], [1, -2, 2]]) / 3
    for perm in itertools.permutations(range(3)):
        for signs in ([1, 1, 1], [-1, 1, -1]):
            cases.append(third[:, perm] * np.array(signs))
    out = []
    for d in cases:
        img = sitk.Image(2, 2, 2, sitk.sitkUInt8)
        img.SetDirection(tuple(float(x) for x in d.ravel()))
        fields = dict(itk_write(img, "o.mha"))
        out.append({"direction": list(img.GetDirection()), "orientation": fields["AnatomicalOrientation"]})
    return out


def main():
    out = []
    for name in FILES:
        img, s = sitk_read(name)
        out.append({"file": name, "sitk": s, "itk_header": itk_write(clean(img), name)})
    with open("expected.json", "w") as f:
        json.dump({"files": out, "orientations": orientations()}, f, indent=1)


if __name__ == "__main__":
    main()
