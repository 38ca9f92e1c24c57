#!/usr/bin/env python3
"""Open a store written by `train predict -o OUT.ome.zarr` with ome-zarr-py
and check what it reads: the labels image (axes z, y, x, uint8) with its
scale and translation, the probabilities image (axes c, z, y, x, float32)
beside it, and that the labels are the probabilities' argmax. The chunks
are decoded by numcodecs (c-blosc's zstd), not by voxtrain's reader.

Usage (a scratch venv; nothing here runs at test time):
    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install ome-zarr
    /tmp/venv/bin/python cmd/train/testdata/check_ome_zarr.py [cmd/train/testdata/blocks.ome.zarr]

The fixture blocks.ome.zarr is written by
    go test ./cmd/train -run TestPredictBlocksOMEZarrFixture -args -update-ome-zarr
"""
import os
import sys

import numpy as np
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader


def image(path):
    loc = parse_url(path)
    assert loc is not None, f"{path}: ome-zarr does not recognise the store"
    nodes = list(Reader(loc)())
    assert nodes, f"{path}: no node"
    node = nodes[0]
    return node.metadata, [np.asarray(d) for d in node.data]


def main():
    store = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "blocks.ome.zarr")
    meta, levels = image(store)
    axes = [a["name"] for a in meta["axes"]]
    assert axes == ["z", "y", "x"], axes
    assert len(levels) == 1, len(levels)
    labels = levels[0]
    assert labels.dtype == np.uint8, labels.dtype
    assert labels.shape == (16, 16, 16), labels.shape
    (scale, trans), = meta["coordinateTransformations"]
    assert scale["type"] == "scale" and np.allclose(scale["scale"], [2, 0.8, 0.8]), scale
    # The ROI 8:24,4:20,12:28 of an input with origin (10, -5, 3).
    assert trans["type"] == "translation" and np.allclose(trans["translation"], [10 + 2 * 8, -5 + 0.8 * 4, 3 + 0.8 * 12]), trans

    pmeta, plevels = image(os.path.join(store, "probabilities"))
    assert [a["name"] for a in pmeta["axes"]] == ["c", "z", "y", "x"], pmeta["axes"]
    probs = plevels[0]
    assert probs.dtype == np.float32 and probs.shape == (3, 16, 16, 16), (probs.dtype, probs.shape)
    assert np.allclose(probs.sum(axis=0), 1, atol=1e-5), "probabilities do not sum to 1"
    assert (probs.argmax(axis=0) == labels).all(), "labels are not the probabilities' argmax"
    print(f"ok: {store}: labels {labels.shape} {labels.dtype} classes {np.unique(labels).tolist()}, "
          f"scale {scale['scale']}, translation {trans['translation']}; probabilities {probs.shape} {probs.dtype}")


if __name__ == "__main__":
    main()
