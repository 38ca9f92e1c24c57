#!/usr/bin/env python3
"""Make the NIfTI conformance fixtures for package nifti and record what
nibabel reads from them (expected.json). Run once; the outputs are committed.

Independent writers:
  synth/  written by nibabel (every datatype x byte order, NIfTI-1 and -2,
          .nii, .nii.gz, .hdr/.img, .img.gz, scaled, 1D..7D, qform-only,
          no-code, extensions, NaN).
  real/   files written by other tools: nibabel's own test data (SPM, FSL,
          AFNI/CIFTI examples), dcm2niix (a scanner converter) and nibabel's
          parrec2nii (Philips PAR/REC converter) on DICOM/PAR test files,
          SimpleITK (ITK's NIfTI writer), and one MSD demo case.

Environment (reference tooling only, never needed by `make test`):
  apt-get install python3-nibabel python3-numpy python3-pydicom
  /usr/bin/python3 -m venv --system-site-packages /tmp/fixvenv
  /tmp/fixvenv/bin/pip install dcm2niix SimpleITK
  /tmp/fixvenv/bin/python nifti/testdata/make_fixtures.py
"""
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import nibabel as nib
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SYNTH = os.path.join(HERE, "synth")
REAL = os.path.join(HERE, "real")
NIBDATA = os.path.join(os.path.dirname(nib.__file__), "tests", "data")
DEMO = "/work/shared/data/demo/imagesTr/hippocampus_003.nii.gz"
BIN = os.path.dirname(sys.executable)

rng = np.random.default_rng(20261125)

# An oblique affine with a reflection (det < 0) so qfac = -1 is exercised.
th = 0.3
ROT = np.array([[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1]])
OBLIQUE = np.eye(4)
OBLIQUE[:3, :3] = ROT @ np.diag([0.9, 1.1, -2.0])
OBLIQUE[:3, 3] = [-40.5, 12.25, 7.0]


def data_for(dtype, shape):
    if dtype == "RGB24":
        dt = np.dtype([("R", "u1"), ("G", "u1"), ("B", "u1")])
        a = np.zeros(shape, dtype=dt)
        for f in "RGB":
            a[f] = rng.integers(0, 256, size=shape)
        return a
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(info.min, -(2**40)), min(info.max, 2**40)
        a = rng.integers(lo, hi, size=shape, dtype=dt, endpoint=True)
        a.flat[0], a.flat[1] = info.min, info.max  # extremes of the type
        return a
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return (rng.standard_normal(shape) * 100).astype(dt)


def save(img, name):
    path = os.path.join(SYNTH, name)
    nib.save(img, path)
    return path


def make_synth():
    shutil.rmtree(SYNTH, ignore_errors=True)
    os.makedirs(SYNTH)
    shape = (5, 4, 3)
    out = []
    for dtype in ["uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                  "float32", "float64", "complex64", "complex128", "RGB24"]:
        for endian in "<>":
            data = data_for(dtype, shape)
            hdr = nib.Nifti1Header(endianness=endian)
            img = nib.Nifti1Image(data, OBLIQUE, header=hdr, dtype=data.dtype)
            img.header.set_qform(OBLIQUE, code=1)
            img.header.set_sform(OBLIQUE, code=2)
            name = f"dt_{dtype}_{'le' if endian == '<' else 'be'}.nii"
            out.append(save(img, name))
    # NIfTI-2, both byte orders, plain and gzipped.
    for endian in "<>":
        tag = "le" if endian == "<" else "be"
        data = data_for("int16", (6, 5, 4))
        img = nib.Nifti2Image(data, OBLIQUE, header=nib.Nifti2Header(endianness=endian))
        out.append(save(img, f"nifti2_int16_{tag}.nii"))
        out.append(save(img, f"nifti2_int16_{tag}.nii.gz"))
    # Scaled: nibabel picks slope/intercept to store floats as int16.
    data = (rng.standard_normal((7, 6, 5)) * 800 + 300).astype(np.float64)
    img = nib.Nifti1Image(data, np.diag([1.5, 1.5, 3.0, 1.0]))
    img.set_data_dtype(np.int16)
    out.append(save(img, "scaled_int16.nii.gz"))
    img = nib.Nifti1Image(data, np.diag([1.5, 1.5, 3.0, 1.0]))
    img.set_data_dtype(np.uint8)
    out.append(save(img, "scaled_uint8.nii"))
    # 4D gz, pair files, gzipped pair.
    d4 = data_for("float32", (5, 4, 3, 2))
    out.append(save(nib.Nifti1Image(d4, OBLIQUE), "four_d.nii.gz"))
    pair = nib.Nifti1Pair(data_for("int16", shape), OBLIQUE)
    out.append(save(pair, "pair_int16.img"))
    out.append(save(nib.Nifti1Pair(data_for("float32", shape), OBLIQUE), "pair_gz.img.gz"))
    out.append(save(nib.Nifti2Pair(data_for("uint8", shape), OBLIQUE), "pair2_uint8.hdr"))
    # qform only (sform_code 0), oblique with qfac -1; and neither code.
    img = nib.Nifti1Image(data_for("int16", shape), None)
    img.header.set_qform(OBLIQUE, code=1)
    img.header.set_sform(np.eye(4), code=0)
    out.append(save(img, "qform_only.nii"))
    img = nib.Nifti1Image(data_for("int16", shape), None)
    img.header.set_zooms((0.8, 0.9, 2.5))
    img.header.set_qform(None, code=0)
    img.header.set_sform(None, code=0)
    out.append(save(img, "no_codes.nii"))
    # Header extensions before the data.
    img = nib.Nifti1Image(data_for("int16", shape), OBLIQUE)
    img.header.extensions.append(nib.nifti1.Nifti1Extension("comment", b"voxtrain conformance fixture"))
    img.header.extensions.append(nib.nifti1.Nifti1Extension("afni", b"<AFNI_attributes></AFNI_attributes>"))
    out.append(save(img, "extensions.nii.gz"))
    # Dimensionality 1, 2, 5 and 7.
    for shp in [(11,), (6, 5), (3, 3, 2, 2, 2), (2, 2, 2, 1, 2, 1, 2)]:
        out.append(save(nib.Nifti1Image(data_for("float32", shp), np.eye(4)), f"ndim{len(shp)}.nii"))
    # NaN in float data.
    d = data_for("float32", shape)
    d[1, 2, 0] = np.nan
    out.append(save(nib.Nifti1Image(d, np.eye(4)), "nan_float32.nii"))
    # A label-like uint8 volume with a sform only.
    img = nib.Nifti1Image(rng.integers(0, 3, size=(9, 8, 7)).astype(np.uint8), OBLIQUE)
    img.header.set_qform(None, code=0)
    out.append(save(img, "labels_sform_only.nii.gz"))
    return out


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_real():
    shutil.rmtree(REAL, ignore_errors=True)
    os.makedirs(REAL)
    for name in ["example4d.nii.gz", "anatomical.nii", "functional.nii", "example_nifti2.nii.gz",
                 "row_major.dconn.nii", "standard.nii.gz", "reoriented_anat_moved.nii",
                 "resampled_anat_moved.nii"]:
        shutil.copy(os.path.join(NIBDATA, name), os.path.join(REAL, "nibabel_" + name))
    import pydicom.data
    dcmdir = os.path.dirname(pydicom.data.get_testdata_file("CT_small.dcm"))
    with tempfile.TemporaryDirectory() as tmp:
        # dcm2niix: one series per input folder.
        for src, tag, gz in [(os.path.join(dcmdir, "CT_small.dcm"), "ct", "n"),
                             (os.path.join(dcmdir, "MR_small.dcm"), "mr", "y"),
                             (os.path.join(NIBDATA, "0.dcm"), "siemens", "y")]:
            d = os.path.join(tmp, tag)
            os.makedirs(d)
            shutil.copy(src, d)
            run([os.path.join(BIN, "dcm2niix"), "-z", gz, "-b", "n", "-f", "dcm2niix_" + tag, "-o", REAL, d])
        # nibabel's parrec2nii (Philips PAR/REC), scaled float output.
        run(["parrec2nii", "--overwrite", "--scaling", "dv", "-o", tmp,
             os.path.join(NIBDATA, "phantom_EPI_asc_CLEAR_2_1.PAR")])
        shutil.copy(os.path.join(tmp, "phantom_EPI_asc_CLEAR_2_1.nii"), os.path.join(REAL, "parrec2nii_phantom.nii"))
        # ITK via SimpleITK: read DICOM, write NIfTI (plain and gzipped).
        import SimpleITK as sitk
        im = sitk.ReadImage(os.path.join(dcmdir, "CT_small.dcm"))
        sitk.WriteImage(im, os.path.join(REAL, "itk_ct.nii.gz"))
        im = sitk.ReadImage(os.path.join(dcmdir, "MR_small.dcm"))
        sitk.WriteImage(sitk.Cast(im, sitk.sitkFloat32), os.path.join(REAL, "itk_mr_float.nii"))
    shutil.copy(DEMO, os.path.join(REAL, "msd_hippocampus_003.nii.gz"))
    for junk in glob.glob(os.path.join(REAL, "*.bv*")):
        os.remove(junk)
    return sorted(glob.glob(os.path.join(REAL, "*.nii*")))


def load(path):
    if path.endswith(".dconn.nii"):
        return nib.Nifti2Image.from_filename(path)
    return nib.load(path)


def floats(a):
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(a, dtype=np.float64).ravel()]


def mat(m):
    return [floats(r) for r in np.asarray(m, dtype=np.float64)]


def describe(path):
    img = load(path)
    # img.header has scaling and vox_offset reset by nibabel; read the header
    # as stored (with nibabel's load-time check_fix applied) for those fields.
    with nib.openers.ImageOpener((img.file_map.get("header") or img.file_map["image"]).filename) as f:
        hdr = type(img.header).from_fileobj(f)
    version = 2 if isinstance(hdr, nib.Nifti2Header) else 1
    raw = np.asanyarray(img.dataobj.get_unscaled())
    le = raw.astype(raw.dtype.newbyteorder("<")) if raw.dtype.fields is None else raw
    rawbytes = le.tobytes(order="F")
    try:
        q = mat(hdr.get_qform())
    except Exception:
        q = None
    stats = None
    if raw.dtype.fields is None and raw.dtype.kind != "c":
        d = img.get_fdata()
        stats = {"min": floats([d.min()])[0], "max": floats([d.max()])[0],
                 "mean": floats([d.mean()])[0], "sum": floats([d.sum()])[0]}
    return {
        "file": os.path.relpath(path, HERE),
        "nifti_version": version,
        "dim": [int(v) for v in hdr["dim"]],
        "pixdim": floats(hdr["pixdim"]),
        "datatype": int(hdr["datatype"]),
        "bitpix": int(hdr["bitpix"]),
        "vox_offset": int(hdr["vox_offset"]),
        "scl_slope": floats([hdr["scl_slope"]])[0],
        "scl_inter": floats([hdr["scl_inter"]])[0],
        "qform_code": int(hdr["qform_code"]),
        "sform_code": int(hdr["sform_code"]),
        "qform": q,
        "sform": mat(hdr.get_sform()),
        "affine": mat(img.affine),
        "shape": [int(v) for v in img.shape],
        "raw_sha256": hashlib.sha256(rawbytes).hexdigest(),
        "stats": stats,
    }


def main():
    files = make_synth() + make_real()
    described = []
    for p in files:
        described.append(describe(p))
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump({"nibabel_version": nib.__version__, "files": described}, f, indent=1)
    print(f"{len(described)} files described")


if __name__ == "__main__":
    main()
