"""Makes the many-case, many-label nnU-Net evaluation fixture for
evaluation/conformance_test.go (TestMatchesNNUNetPairwise).

nnU-Net's summary.json means are NumPy's: np.nanmean over the cases per
label, np.mean over the labels for foreground_mean, both summing pairwise
(eight accumulators from 8 values on), so with 8 or more cases or labels
their last bits differ from a running sum's. This fixture has 12 cases
and 10 labels on tiny volumes with noisy predictions (Dice and IoU values
of full precision), label 9 absent from both files of a few cases (NaN
cases that np.nanmean leaves out in their places) and label 10 absent
from a few references (Dice 0). make_fixture.py checks that a running sum
would miss some of the means, so the test can tell the two apart.

Made with nnunetv2 2.8.1, SimpleITK, numpy 2.4.6, in a scratch venv set up
as evaluation/testdata/nnunet/make_fixture.py says, then:
  cd evaluation/testdata/nnunet_many && /tmp/venv/bin/python make_fixture.py
"""
import json
import math
import os
import shutil

import numpy as np
import SimpleITK as sitk
from nnunetv2.evaluation.evaluate_predictions import compute_metrics_on_folder
from nnunetv2.imageio.simpleitk_reader_writer import SimpleITKIO

SHAPE = (6, 7, 8)  # (z, y, x) = voxtrain's (D, H, W)
LABELS = list(range(1, 11))
CASES = 12


def write(arr, path):
    img = sitk.GetImageFromArray(arr.astype(np.uint8))
    img.SetSpacing((1.0, 1.5, 2.0))  # x, y, z
    sitk.WriteImage(img, path)


def running_differs(summary):
    """How many means a running sum (not NumPy's pairwise one) misses."""
    cases = summary['metric_per_case']
    n = 0
    for k in map(str, LABELS):
        for m in ('Dice', 'IoU'):
            vals = [c['metrics'][k][m] for c in cases if not math.isnan(c['metrics'][k][m])]
            s = 0.0
            for v in vals:
                s += v
            if vals and s / len(vals) != summary['mean'][k][m]:
                n += 1
    for m in ('Dice', 'IoU'):
        s = 0.0
        for k in map(str, LABELS):
            s += summary['mean'][k][m]
        if s / len(LABELS) != summary['foreground_mean'][m]:
            n += 1
    return n


def main():
    rng = np.random.RandomState(2025)
    for d in ('ref', 'pred'):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    for i in range(CASES):
        ref = rng.randint(0, len(LABELS) + 1, SHAPE).astype(np.uint8)
        ref[rng.rand(*SHAPE) < 0.3] = 0
        pred = ref.copy()
        flip = rng.rand(*SHAPE) < rng.uniform(0.1, 0.5)
        pred[flip] = rng.randint(0, len(LABELS) + 1, size=flip.sum())
        if i % 4 == 1:  # label 9 in neither file: Dice NaN
            ref[ref == 9] = 0
            pred[pred == 9] = 0
        if i % 5 == 2:  # label 10 predicted only: Dice 0
            ref[ref == 10] = 0
        name = 'case_%02d' % i
        write(ref, os.path.join('ref', name + '.nii.gz'))
        write(pred, os.path.join('pred', name + '.nii.gz'))
    compute_metrics_on_folder('ref', 'pred', 'summary.json', SimpleITKIO(), '.nii.gz', LABELS, num_processes=1)
    # read back as Python's json does (NaN tokens)
    with open('summary.json') as f:
        summary = json.load(f)
    n = running_differs(summary)
    print(n, 'means differ from a running sum')
    assert n >= 3, 'the fixture cannot tell a running sum from NumPy\'s'


if __name__ == '__main__':
    main()
