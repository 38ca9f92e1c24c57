"""Makes the nnU-Net region evaluation fixture for
evaluation/conformance_test.go (TestMatchesNNUNetRegions).

Writes a region-based dataset.json (BraTS-like: labels 1..3, the ignore
label 4) and a few tiny label volumes (ref/ and pred/, .nii.gz via
SimpleITK, as nnU-Net reads them), takes the regions from nnU-Net's own
LabelManager (as compute_metrics_on_folder2 does:
lm.foreground_regions, lm.ignore_label) and scores them with nnU-Net v2's
compute_metrics_on_folder: with the ignore label (summary_ignore.json) and
without it (summary.json, where reference voxels of 4 are outside every
region). The regions are a list of three values, a list in non-increasing
order ((3, 2): nnU-Net keeps the order in the key), a plain value (3) and
a list of one value ((1,)), so every key form nnU-Net writes appears.

Made with nnunetv2 2.8.1, SimpleITK, numpy, in a scratch venv set up as
evaluation/testdata/nnunet/make_fixture.py says, then:
  cd evaluation/testdata/nnunet_regions && /tmp/venv/bin/python make_fixture.py
"""
import json
import os
import shutil

import numpy as np
import SimpleITK as sitk
from nnunetv2.evaluation.evaluate_predictions import compute_metrics_on_folder
from nnunetv2.imageio.simpleitk_reader_writer import SimpleITKIO
from nnunetv2.utilities.label_handling.label_handling import LabelManager

SHAPE = (5, 6, 7)  # (z, y, x) = voxtrain's (D, H, W)

DATASET = {
    "channel_names": {"0": "T1"},
    "labels": {
        "background": 0,
        "whole tumor": [1, 2, 3],
        "tumor core": [3, 2],
        "enhancing tumor": 3,
        "edema": [1],
        "ignore": 4,
    },
    "regions_class_order": [1, 2, 3, 1],
    "numTraining": 4,
    "file_ending": ".nii.gz",
}


def write(arr, path):
    img = sitk.GetImageFromArray(arr.astype(np.uint8))
    img.SetSpacing((1.0, 1.5, 2.0))  # x, y, z
    sitk.WriteImage(img, path)


def tumour(shape, lo, hi):
    """Nested boxes: edema 1 around core 2 around enhancing 3."""
    a = np.zeros(shape, np.uint8)
    a[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] = 1
    a[lo[0] + 1:hi[0] - 1, lo[1] + 1:hi[1] - 1, lo[2] + 1:hi[2] - 1] = 2
    a[lo[0] + 1:hi[0] - 1, lo[1] + 2:hi[1] - 1, lo[2] + 2:hi[2] - 1] = 3
    return a


def main():
    rng = np.random.RandomState(7)
    for d in ('ref', 'pred'):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    with open('dataset.json', 'w') as f:
        json.dump(DATASET, f, indent=4)
    cases = {}
    # a: every label, a noisy prediction; an ignored slab, partly predicted
    ref = tumour(SHAPE, (0, 0, 0), (5, 6, 6))
    ref[:, :, 6] = 4
    pred = ref.copy()
    pred[:, :, 6] = 0
    flip = rng.rand(*SHAPE) < 0.2
    pred[flip] = rng.randint(0, 4, size=flip.sum())
    cases['case_a'] = (ref, pred)
    # b: no enhancing tumour anywhere (3 and (3, 2)'s 3 absent): core is
    # label 2 only; the prediction confuses edema and core
    ref = np.zeros(SHAPE, np.uint8)
    ref[1:4, 1:5, 1:5] = 1
    ref[2, 2:4, 2:4] = 2
    pred = np.zeros(SHAPE, np.uint8)
    pred[1:4, 1:5, 1:6] = 2
    pred[2, 2:4, 2:4] = 1
    cases['case_b'] = (ref, pred)
    # c: no tumour in the reference, some predicted; an ignore blob
    ref = np.zeros(SHAPE, np.uint8)
    ref[0:2, 0:2, 0:2] = 4
    pred = np.zeros(SHAPE, np.uint8)
    pred[0:2, 0:3, 0:3] = 3
    cases['case_c'] = (ref, pred)
    # d: nothing anywhere but ignored voxels (every Dice NaN)
    ref = np.zeros(SHAPE, np.uint8)
    ref[4, 5, 6] = 4
    pred = np.zeros(SHAPE, np.uint8)
    cases['case_d'] = (ref, pred)
    for name, (ref, pred) in cases.items():
        write(ref, os.path.join('ref', name + '.nii.gz'))
        write(pred, os.path.join('pred', name + '.nii.gz'))
    # as compute_metrics_on_folder2 / PlansManager.get_label_manager
    lm = LabelManager(label_dict=DATASET['labels'], regions_class_order=DATASET.get('regions_class_order'))
    assert lm.has_regions
    regions = lm.foreground_regions
    print('regions', regions, 'ignore', lm.ignore_label)
    rw = SimpleITKIO()
    compute_metrics_on_folder('ref', 'pred', 'summary_ignore.json', rw, DATASET['file_ending'], regions,
                              lm.ignore_label, num_processes=1)
    compute_metrics_on_folder('ref', 'pred', 'summary.json', rw, DATASET['file_ending'], regions,
                              None, num_processes=1)


if __name__ == '__main__':
    main()
