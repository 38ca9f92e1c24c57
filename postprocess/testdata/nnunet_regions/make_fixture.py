"""Makes the nnU-Net region post-processing fixture for
postprocess/conformance_test.go (TestDetermineMatchesNNUNetRegions).

Each scenario is a tiny cross-validation folder (ref/ and pred/, .nii.gz
via SimpleITK) with a region-based dataset.json, run through nnU-Net v2's
own determine_postprocessing. Kept from what it does:

  nnunet_postprocessing.json  its postprocessing.json (steps kept, scores
                              before and after)
  nnunet_log.txt              its decision lines, in order (what it prints
                              for each candidate step)
  nnunet_postprocessed/       its post-processed predictions
                              (folder_predictions/postprocessed)
  nnunet_applied/             apply_postprocessing with the steps it
                              returned, run on pred/ (load_postprocess_save,
                              as nnUNetv2_apply_postprocessing)
  nnunet_each/<i>/            remove_all_but_largest_component_from_segmentation
                              of candidate i alone on pred/: 0 is the
                              foreground labels together, 1.. the regions in
                              order, whether kept or not

  regions     BraTS-like: "whole tumor" [1, 2, 3], "tumor core" [2, 3],
              "enhancing tumor" 3. cv_1 has a separate one-voxel enhancing
              lesion, predicted, and a label-2 voxel predicted inside the
              edema apart from the core; cv_2 a large spurious edema blob
              and two enhancing parts inside its core.
              Keeping the largest foreground component raises the
              foreground mean Dice (the blob goes) but lowers the tumor
              core and enhancing means (the lesion goes): vetoed. The same
              step for the whole-tumor region, judged on its Dice alone,
              is kept. Tumor core's step then removes the stray label-2
              voxel, setting it to background (kept, though it lowers the
              whole tumor's Dice: only the region's own Dice decides).
              Enhancing tumor's step removes cv_2's smaller part: not kept.
  one_region  a single region, "tumor" [1, 2]: the foreground step is
              kept, and with one region there is no per-region step.

Made with nnunetv2 2.8.1, SimpleITK, numpy (the venv of
evaluation/testdata/nnunet/make_fixture.py), then:
  cd postprocess/testdata/nnunet_regions && /tmp/venv-evalpp/bin/python make_fixture.py
"""
import contextlib
import io
import json
import os
import shutil

import numpy as np
import SimpleITK as sitk
from nnunetv2.imageio.simpleitk_reader_writer import SimpleITKIO
from nnunetv2.postprocessing.remove_connected_components import (
    determine_postprocessing, load_postprocess_save, remove_all_but_largest_component_from_segmentation)
from nnunetv2.utilities.label_handling.label_handling import LabelManager

SHAPE = (10, 10, 10)  # (z, y, x) = voxtrain's (D, H, W)


def write(arr, path):
    sitk.WriteImage(sitk.GetImageFromArray(arr.astype(np.uint8)), path)


def regions():
    cases = {}
    ref = np.zeros(SHAPE, np.uint8)
    ref[1:7, 1:8, 1:8] = 1
    ref[2:6, 2:6, 2:6] = 2
    ref[3:5, 3:5, 3:5] = 3
    ref[0, 9, 9] = 3  # a separate enhancing lesion
    pred = ref.copy()
    pred[6, 7, 7] = 2  # core predicted in the edema, apart from the core
    cases['cv_1'] = (ref, pred)
    ref = np.zeros(SHAPE, np.uint8)
    ref[0:5, 0:5, 0:5] = 1
    ref[1:4, 1:4, 1:4] = 2
    ref[1, 1, 1] = 3
    ref[3, 3, 2:4] = 3
    pred = ref.copy()
    pred[7:10, 6:10, 6:10] = 1  # spurious edema
    cases['cv_2'] = (ref, pred)
    labels = {'background': 0, 'whole tumor': [1, 2, 3], 'tumor core': [2, 3], 'enhancing tumor': 3}
    return cases, labels, [1, 2, 3]


def one_region():
    cases = {}
    for k, shift in (('cv_1', 0), ('cv_2', 2)):
        ref = np.zeros(SHAPE, np.uint8)
        ref[shift:shift + 4, 1:5, 1:5] = 1
        ref[shift + 1:shift + 3, 2:4, 2:4] = 2
        pred = ref.copy()
        pred[9, 8:10, 8:10] = 2
        cases[k] = (ref, pred)
    return cases, {'background': 0, 'tumor': [1, 2]}, [1]


def main():
    plans = {'image_reader_writer': 'SimpleITKIO', 'label_manager': 'LabelManager'}
    rw = SimpleITKIO()
    for name, make in (('regions', regions), ('one_region', one_region)):
        shutil.rmtree(name, ignore_errors=True)
        for d in ('ref', 'pred', 'nnunet_applied'):
            os.makedirs(os.path.join(name, d))
        cases, labels, order = make()
        for k, (ref, pred) in cases.items():
            write(ref, os.path.join(name, 'ref', k + '.nii.gz'))
            write(pred, os.path.join(name, 'pred', k + '.nii.gz'))
        dj = {'labels': labels, 'regions_class_order': order, 'file_ending': '.nii.gz',
              'channel_names': {'0': 'x'}, 'numTraining': len(cases)}
        with open(os.path.join(name, 'dataset.json'), 'w') as f:
            json.dump(dj, f, indent=1)
        lm = LabelManager(labels, order)
        assert lm.has_regions
        work = name + '_work'
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(os.path.join(name, 'pred'), work)
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            fns, kwargs = determine_postprocessing(work, os.path.join(name, 'ref'), plans, dj, num_processes=1)
        print(name, kwargs)
        print(log.getvalue())
        with open(os.path.join(name, 'nnunet_log.txt'), 'w') as f:
            for line in log.getvalue().splitlines():
                if 'largest' in line:
                    f.write(line + '\n')
        shutil.copy(os.path.join(work, 'postprocessing.json'), os.path.join(name, 'nnunet_postprocessing.json'))
        os.makedirs(os.path.join(name, 'nnunet_postprocessed'))
        for k in cases:
            shutil.copy(os.path.join(work, 'postprocessed', k + '.nii.gz'), os.path.join(name, 'nnunet_postprocessed'))
        shutil.rmtree(work)
        candidates = [lm.foreground_labels] + list(lm.foreground_regions)
        for k in cases:
            src = os.path.join(name, 'pred', k + '.nii.gz')
            load_postprocess_save(src, os.path.join(name, 'nnunet_applied', k + '.nii.gz'), rw, fns, kwargs)
            for i, c in enumerate(candidates):
                d = os.path.join(name, 'nnunet_each', str(i))
                os.makedirs(d, exist_ok=True)
                load_postprocess_save(src, os.path.join(d, k + '.nii.gz'), rw,
                                      [remove_all_but_largest_component_from_segmentation], [{'labels_or_regions': c}])


if __name__ == '__main__':
    main()
