"""Makes the nnU-Net evaluation fixture for evaluation/conformance_test.go.

Writes a few tiny label volumes (ref/ and pred/, .nii.gz via SimpleITK, as
nnU-Net reads them) and scores them with nnU-Net v2's own
compute_metrics_on_folder, once for labels [1, 2] (summary_12.json) and once
for [1, 2, 3, 4] (summary_1234.json: label 3 appears in one prediction only,
label 4 nowhere, so NaN means and a NaN foreground mean appear).

Made with nnunetv2 2.8.1, SimpleITK, numpy, in a scratch venv:
  python3 -m venv --system-site-packages /tmp/venv
  /tmp/venv/bin/pip install --no-deps nnunetv2 SimpleITK batchgenerators acvl-utils \
      dynamic_network_architectures yacs
  /tmp/venv/bin/pip install scikit-image nibabel blosc2
  cd evaluation/testdata/nnunet && /tmp/venv/bin/python make_fixture.py
(nnunetv2 imports torch; Debian's python3-torch 1.13 serves.)
"""
import os
import shutil

import numpy as np
import SimpleITK as sitk
from nnunetv2.evaluation.evaluate_predictions import compute_metrics_on_folder
from nnunetv2.imageio.simpleitk_reader_writer import SimpleITKIO

SHAPE = (5, 6, 7)  # (z, y, x) = voxtrain's (D, H, W)


def write(arr, path):
    img = sitk.GetImageFromArray(arr.astype(np.uint8))
    img.SetSpacing((1.0, 1.5, 2.0))  # x, y, z
    sitk.WriteImage(img, path)


def main():
    rng = np.random.RandomState(14)
    for d in ('ref', 'pred'):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    cases = {}
    # a: both labels, noisy prediction
    ref = np.zeros(SHAPE, np.uint8)
    ref[1:4, 1:4, 1:4] = 1
    ref[1:4, 1:4, 4:6] = 2
    pred = ref.copy()
    flip = rng.rand(*SHAPE) < 0.15
    pred[flip] = rng.randint(0, 3, size=flip.sum())
    cases['case_a'] = (ref, pred)
    # b: label 2 in neither (Dice NaN), label 1 shifted by one voxel
    ref = np.zeros(SHAPE, np.uint8)
    ref[0:3, 2:5, 2:5] = 1
    pred = np.zeros(SHAPE, np.uint8)
    pred[1:4, 2:5, 2:5] = 1
    cases['case_b'] = (ref, pred)
    # c: label 1 missed (Dice 0), label 2 over-segmented
    ref = np.zeros(SHAPE, np.uint8)
    ref[2, 2, 2] = 1
    ref[3:5, 0:3, 0:3] = 2
    pred = np.zeros(SHAPE, np.uint8)
    pred[2:5, 0:4, 0:4] = 2
    cases['case_c'] = (ref, pred)
    # d: label 1 predicted where the reference has none; label 3 only here
    ref = np.zeros(SHAPE, np.uint8)
    ref[0:2, 0:2, 0:2] = 2
    pred = np.zeros(SHAPE, np.uint8)
    pred[0:2, 0:2, 0:2] = 2
    pred[4, 5, 6] = 1
    pred[4, 0, 6] = 3
    cases['case_d'] = (ref, pred)
    for name, (ref, pred) in cases.items():
        write(ref, os.path.join('ref', name + '.nii.gz'))
        write(pred, os.path.join('pred', name + '.nii.gz'))
    rw = SimpleITKIO()
    compute_metrics_on_folder('ref', 'pred', 'summary_12.json', rw, '.nii.gz', [1, 2], num_processes=1)
    compute_metrics_on_folder('ref', 'pred', 'summary_1234.json', rw, '.nii.gz', [1, 2, 3, 4], num_processes=1)


if __name__ == '__main__':
    main()
