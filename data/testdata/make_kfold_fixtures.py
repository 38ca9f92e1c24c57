"""Writes the reference splits that data's makeFolds and makeHoldout must
reproduce: nnU-Net v2's cross-validation folds, which it makes with
scikit-learn's KFold(n_splits, shuffle=True, random_state=12345) over
np.sort of the case identifiers (nnUNetTrainer.do_split ->
generate_crossval_split), and its random 80:20 fallback split
(RandomState(12345 + fold).choice(n, int(n * 0.8), replace=False)).

Run from the repository root in a scratch venv with numpy and scikit-learn
from PyPI:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy scikit-learn
    /tmp/venv/bin/python data/testdata/make_kfold_fixtures.py [FULL_DEMO_DIR]

It writes
  data/testdata/kfold.json             KFold splits for several (n, k) and
                                       hold-out splits for several fractions
  testdata/demo/splits_final.json      the file nnU-Net writes for the 80
                                       bundled demo cases
  data/testdata/splits_demo260.json    the same for the 260 cases of the
                                       full demo (FULL_DEMO_DIR, default
                                       ../shared/data/demo), when present
"""
import json
import os
import random
import sys

import numpy as np
import sklearn
from sklearn.model_selection import KFold

SEED = 12345


def crossval_split(identifiers, n_splits):
    """nnU-Net v2's generate_crossval_split, as nnUNetTrainer.do_split
    calls it: over the sorted identifiers."""
    keys = list(np.sort(identifiers))
    splits = []
    for train_idx, test_idx in KFold(n_splits=n_splits, shuffle=True, random_state=SEED).split(keys):
        splits.append({"train": [str(k) for k in np.array(keys)[train_idx]],
                       "val": [str(k) for k in np.array(keys)[test_idx]]})
    return splits


def holdout(identifiers, fraction):
    """The first int(n * (1 - fraction)) of RandomState(12345)'s permutation
    of the sorted keys train, the rest validate (both sorted)."""
    keys = list(np.sort(identifiers))
    n_train = int(len(keys) * (1 - fraction))
    perm = np.random.RandomState(SEED).permutation(len(keys))
    train = sorted(str(keys[i]) for i in perm[:n_train])
    val = sorted(str(keys[i]) for i in perm[n_train:])
    if fraction == 0.2:
        # nnU-Net's own 80:20 split for fold 0 (do_split past the splits
        # file) must be this one.
        rnd = np.random.RandomState(seed=SEED + 0)
        idx_tr = rnd.choice(len(keys), int(len(keys) * 0.8), replace=False)
        assert sorted(str(keys[i]) for i in idx_tr) == train
    return {"train": train, "val": val}


def ids_for(n):
    """Identifiers like nnU-Net's, unpadded where n is large so that sorting
    (case_10 before case_2) matters, in a scrambled input order."""
    if n <= 16:
        ids = ["liver_%d" % (3 * i + 1) for i in range(n)]
    elif n <= 260:
        ids = ["hippocampus_%03d" % (2 * i + 1) for i in range(n)]
    else:
        ids = ["case_%d" % i for i in range(n)]
    random.Random(n).shuffle(ids)
    return ids


def dataset_ids(folder):
    """The case IDs data.OpenDataset gives an MSD dataset.json folder: the
    label file's name without .nii.gz."""
    with open(os.path.join(folder, "dataset.json")) as f:
        training = json.load(f)["training"]
    return [os.path.basename(c["label"])[: -len(".nii.gz")] for c in training]


def save_like_nnunet(splits, path):
    # batchgenerators' save_json, which nnU-Net writes splits_final.json with.
    with open(path, "w") as f:
        json.dump(splits, f, sort_keys=True, indent=4)


def main():
    root = os.getcwd()
    out = {"numpy": np.__version__, "sklearn": sklearn.__version__, "ids": {}, "kfold": [], "holdout": []}
    for n in [5, 7, 16, 80, 260, 1000]:
        ids = ids_for(n)
        out["ids"][str(n)] = ids
        for k in [2, 3, 5, 10]:
            if k > n:
                continue
            splits = crossval_split(ids, k)
            everything = sorted(ids)
            for s in splits:
                # KFold's train indices are the sorted complement of val's:
                # the fixture keeps val only.
                assert s["train"] == [i for i in everything if i not in set(s["val"])]
                assert s["val"] == sorted(s["val"])
            out["kfold"].append({"n": n, "k": k, "val": [s["val"] for s in splits]})
        for p in [0.1, 0.2, 0.25, 0.5]:
            h = holdout(ids, p)
            out["holdout"].append({"n": n, "fraction": p, "val": h["val"]})
    with open(os.path.join(root, "data", "testdata", "kfold.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    save_like_nnunet(crossval_split(dataset_ids(os.path.join(root, "testdata", "demo")), 5),
                     os.path.join(root, "testdata", "demo", "splits_final.json"))
    full = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "..", "shared", "data", "demo")
    if os.path.exists(os.path.join(full, "dataset.json")):
        ids = dataset_ids(full)
        assert len(ids) == 260, len(ids)
        save_like_nnunet(crossval_split(ids, 5), os.path.join(root, "data", "testdata", "splits_demo260.json"))
    else:
        print("no full demo at", full, "- splits_demo260.json not written")


if __name__ == "__main__":
    main()
