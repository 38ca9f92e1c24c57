"""Makes the nnU-Net post-processing fixture for postprocess/conformance_test.go.

Three tiny cross-validation folders (ref/ and pred/ as .nii.gz via
SimpleITK), each run through nnU-Net v2's own determine_postprocessing, whose
postprocessing.json (steps kept, scores before and after) is kept as
<scenario>/nnunet_postprocessing.json; the rest of what it writes is removed.

  fg_kept     spurious blobs: keeping the largest foreground component helps
              every class (kept); per-class steps then change nothing (not
              kept). A reference voxel touching its class only at a corner
              stays: components are 26-connected.
  class_kept  the two classes lie apart: keeping the largest foreground
              component deletes class 2 (rejected, a class got worse); class
              1's step removes a spurious blob (kept).
  rejected    one class whose reference has two parts: removal only hurts.

Environment as evaluation/testdata/nnunet/make_fixture.py (nnunetv2 2.8.1).
Run from this folder: /tmp/venv/bin/python make_fixture.py
"""
import json
import os
import shutil

import numpy as np
import SimpleITK as sitk
from nnunetv2.postprocessing.remove_connected_components import determine_postprocessing

SHAPE = (6, 8, 8)  # (z, y, x) = voxtrain's (D, H, W)


def write(arr, path):
    sitk.WriteImage(sitk.GetImageFromArray(arr.astype(np.uint8)), path)


def fg_kept():
    cases = {}
    ref = np.zeros(SHAPE, np.uint8)
    ref[1:4, 1:4, 1:4] = 1
    ref[1:4, 1:4, 4:6] = 2
    ref[4, 4, 4] = 1  # corner contact with the label-1 box only
    pred = ref.copy()
    pred[5, 7, 7] = 1
    pred[5, 6, 7] = 1
    cases['cv_1'] = (ref, pred)
    ref = np.zeros(SHAPE, np.uint8)
    ref[2:5, 3:6, 2:5] = 1
    ref[2:5, 3:6, 5:7] = 2
    pred = ref.copy()
    pred[2:5, 3:6, 2] = 0
    pred[0, 0, 0] = 2
    cases['cv_2'] = (ref, pred)
    return cases, {'background': 0, 'a': 1, 'b': 2}


def class_kept():
    cases = {}
    for k, shift in (('cv_1', 0), ('cv_2', 1)):
        ref = np.zeros(SHAPE, np.uint8)
        ref[0:4, 0:4, 0:4] = 1
        ref[shift:shift + 2, 6:8, 6:8] = 2
        pred = ref.copy()
        pred[5, 0, 7] = 1
        pred[5, 1, 7] = 1
        cases[k] = (ref, pred)
    return cases, {'background': 0, 'a': 1, 'b': 2}


def rejected():
    cases = {}
    for k, shift in (('cv_1', 0), ('cv_2', 2)):
        ref = np.zeros(SHAPE, np.uint8)
        ref[0:3, 0:3, shift:shift + 3] = 1
        ref[4:6, 6:8, 6:8] = 1
        pred = ref.copy()
        pred[0, 0, shift] = 0
        cases[k] = (ref, pred)
    return cases, {'background': 0, 'a': 1}


def main():
    plans = {'image_reader_writer': 'SimpleITKIO', 'label_manager': 'LabelManager'}
    for name, make in (('fg_kept', fg_kept), ('class_kept', class_kept), ('rejected', rejected)):
        shutil.rmtree(name, ignore_errors=True)
        os.makedirs(os.path.join(name, 'ref'))
        os.makedirs(os.path.join(name, 'pred'))
        cases, labels = make()
        for k, (ref, pred) in cases.items():
            write(ref, os.path.join(name, 'ref', k + '.nii.gz'))
            write(pred, os.path.join(name, 'pred', k + '.nii.gz'))
        dj = {'labels': labels, 'file_ending': '.nii.gz', 'channel_names': {'0': 'x'}, 'numTraining': len(cases)}
        work = name + '_work'
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(os.path.join(name, 'pred'), work)
        determine_postprocessing(work, os.path.join(name, 'ref'), plans, dj, num_processes=1)
        shutil.copy(os.path.join(work, 'postprocessing.json'), os.path.join(name, 'nnunet_postprocessing.json'))
        shutil.rmtree(work)
        with open(os.path.join(name, 'dataset.json'), 'w') as f:
            json.dump(dj, f, indent=1)


if __name__ == '__main__':
    main()
