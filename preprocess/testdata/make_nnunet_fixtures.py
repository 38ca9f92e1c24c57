"""Reference outputs of nnU-Net v2's own preprocessing functions, for the Go
tests of data.resample_order: nnunet, data.crop_to_nonzero and
data.use_mask_for_norm (preprocess/nnresample_test.go, data/parity_test.go).

Run from the repository root with nnunetv2 (2.8.1 made the committed files),
numpy, scipy, scikit-image, pandas, nibabel and acvl-utils installed:

    python3 preprocess/testdata/make_nnunet_fixtures.py

torch is not needed: the functions used never touch it, so a stub stands in
for the imports.

Writes (np.savez, float32 arrays):
  preprocess/testdata/nnunet_resample.npz  small random volumes and label maps
      and nnU-Net's resample_data_or_seg_to_shape of them: images order 3
      (isotropic, and anisotropic with order 0 along the out-of-plane axis),
      labels one-hot order 1, probabilities order 1.
  data/testdata/nnunet_prep.npz  two demo cases, padded and modified as
      parityCase in data/parity_test.go does, run through run_case_npy's steps
      (crop_to_nonzero, ZScoreNormalization with use_mask_for_norm,
      resample_data_or_seg_to_shape with the default plans' orders): the crop
      box, shapes, and every 7th voxel of the image and label (-1 as 0).
"""
import sys
import types

for name in ["torch", "torch.nn", "torch.nn.functional"]:
    m = types.ModuleType(name)
    m.__path__ = []
    sys.modules[name] = m
sys.modules["torch"].Tensor = type("Tensor", (), {})
sys.modules["torch"].nn = sys.modules["torch.nn"]
sys.modules["torch.nn"].functional = sys.modules["torch.nn.functional"]

import nibabel as nib  # noqa: E402
import numpy as np  # noqa: E402
from nnunetv2.preprocessing.cropping.cropping import crop_to_nonzero  # noqa: E402
from nnunetv2.preprocessing.normalization.default_normalization_schemes import ZScoreNormalization  # noqa: E402
from nnunetv2.preprocessing.resampling.default_resampling import (  # noqa: E402
    compute_new_shape, resample_data_or_seg_to_shape)


def f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


def resample(x, new_shape, spacing, target, is_seg, order):
    # The default plans: resampling_fn_data / _seg / _probabilities kwargs.
    return resample_data_or_seg_to_shape(x[None], new_shape, spacing, target, is_seg=is_seg,
                                         order=order, order_z=0, force_separate_z=None)[0]


def resample_fixtures():
    rng = np.random.default_rng(7)
    out = {}
    img = rng.normal(size=(5, 9, 11)).astype(np.float32)
    img[2, 3:6, 4:8] = 4  # a plateau with sharp edges: the clip matters
    out["img"] = f32(img)
    lbl = np.zeros((5, 9, 11), np.int16)
    lbl[1:4, 2:7, 3:9] = 1
    lbl[2, 4:6, 5:7] = 2
    lbl[0, 0, 0] = 2
    out["lbl"] = f32(lbl)
    cases = {
        # name: (new shape, spacing, target)
        "iso": ((7, 6, 16), (1.0, 1.0, 1.0), (5 / 7, 1.5, 11 / 16)),
        "aniso": ((12, 14, 8), (3.5, 1.0, 1.0), (3.5 * 5 / 12, 9 / 14, 11 / 8)),
    }
    for name, (shape, sp, tg) in cases.items():
        out[name + "_img"] = f32(resample(img.astype(np.float32), shape, sp, tg, False, 3))
        out[name + "_lbl"] = f32(resample(lbl, shape, sp, tg, True, 1))
        out[name + "_lin"] = f32(resample(img.astype(np.float32), shape, sp, tg, False, 1))
        out[name + "_spacing"] = f32(sp)
        out[name + "_target"] = f32(tg)
    np.savez("preprocess/testdata/nnunet_resample.npz", **out)


PAD = ((2, 1), (3, 2), (1, 3))


def parity_case(case):
    """The demo case padded with zeros and modified as parityCase does."""
    img = nib.load(f"testdata/demo/imagesTr/{case}.nii.gz")
    spacing = tuple(float(s) for s in img.header.get_zooms()[:3])[::-1]
    x = np.asarray(img.dataobj, dtype=np.float32).transpose(2, 1, 0)  # (D, H, W)
    y = np.asarray(nib.load(f"testdata/demo/labelsTr/{case}.nii.gz").dataobj).astype(np.int16).transpose(2, 1, 0)
    x = np.pad(x, PAD)
    y = np.pad(y, PAD)
    p = [a for a, _ in PAD]
    # A hole (filled: inside the mask) and a zero corner open to the padding
    # (outside the mask) holding a label voxel (inside the norm mask).
    x[p[0] + 4:p[0] + 7, p[1] + 5:p[1] + 9, p[2] + 4:p[2] + 6] = 0
    x[p[0]:p[0] + 3, p[1]:p[1] + 4, p[2]:p[2] + 5] = 0
    y[p[0] + 1, p[1] + 1, p[2] + 1] = 2
    return x, y, spacing


def prep_fixtures():
    out = {}
    for i, (case, target) in enumerate([("hippocampus_001", (1.6, 0.7, 1.3)), ("hippocampus_006", (3.5, 0.9, 1.0))]):
        x, y, spacing = parity_case(case)
        data, seg, bbox = crop_to_nonzero(x[None], y[None])
        data[0] = ZScoreNormalization(use_mask_for_norm=True, intensityproperties={}).run(data[0], seg[0])
        out[f"c{i}_box"] = f32([b[0] for b in bbox] + [b[1] for b in bbox])
        out[f"c{i}_crop_img"] = f32(data[0].ravel()[::7])
        out[f"c{i}_crop_lbl"] = f32(np.maximum(seg[0], 0).ravel()[::7])
        out[f"c{i}_crop_shape"] = f32(data.shape[1:])
        new_shape = compute_new_shape(data.shape[1:], spacing, target)
        img = resample(data[0], new_shape, spacing, target, False, 3)
        lbl = resample(seg[0], new_shape, spacing, target, True, 1)
        out[f"c{i}_target"] = f32(target)
        out[f"c{i}_shape"] = f32(img.shape)
        out[f"c{i}_img"] = f32(img.ravel()[::7])
        out[f"c{i}_lbl"] = f32(np.maximum(lbl, 0).ravel()[::7])
    np.savez("data/testdata/nnunet_prep.npz", **out)


if __name__ == "__main__":
    resample_fixtures()
    prep_fixtures()
