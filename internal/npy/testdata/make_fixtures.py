"""Makes the numpy-written fixtures package npy's tests read, and checks that
numpy reads the archive the Go writer made (go_written.npz, written by
`NPY_UPDATE=1 go test ./internal/npy`).

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy
    /tmp/venv/bin/python internal/npy/testdata/make_fixtures.py

Every array is (arange(n) - 17) / 7 as float32, the values the Go test
expects.
"""
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))


def values(shape):
    n = int(np.prod(shape))
    return ((np.arange(n, dtype=np.float64) - 17) / 7).astype(np.float32).reshape(shape)


probs = values((2, 3, 4, 5))
one = values((3,))
np.savez(os.path.join(here, "numpy_savez.npz"), probabilities=probs, one=one)
np.savez_compressed(os.path.join(here, "numpy_compressed.npz"), probabilities=probs, one=one)
np.save(os.path.join(here, "numpy_scalar.npy"), values(()))

go = os.path.join(here, "go_written.npz")
if os.path.exists(go):
    z = np.load(go)
    assert sorted(z.files) == ["one", "probabilities"], z.files
    for name, want in (("probabilities", probs), ("one", one)):
        got = z[name]
        assert got.dtype == np.float32 and got.shape == want.shape, (name, got.dtype, got.shape)
        assert np.array_equal(got, want), name
    print("numpy", np.__version__, "reads", go, ": probabilities", z["probabilities"].shape, "one", z["one"].shape, "OK")
