"""Writes randomstate.json, the reference outputs of NumPy's legacy
numpy.random.RandomState that package nprand must reproduce bit for bit.

Run in a scratch venv with numpy from PyPI (any 1.17+; the legacy stream is
frozen by NumPy's compatibility policy):

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy
    /tmp/venv/bin/python internal/nprand/testdata/make_fixtures.py

For each seed: the first raw 32-bit MT19937 outputs; bounded draws in
[0, max] as legacy randint makes them (the masked rejection of
random_interval, which shuffle uses: the script checks that randint and
shuffle consume the stream identically); and permutation(n).
"""
import json
import os

import numpy as np

SEEDS = [12345, 0, 12350, 4294967295]
RAW = 700  # more than one 624-word state refill
MAXES = [0, 1, 2, 3, 4, 7, 8, 79, 259, 999, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1, 2**32, 2**40 + 12345, 2**64 - 1]
PERMS = [1, 2, 5, 7, 16, 80, 260, 1000]


def bounded(rs, mx, count):
    """count legacy draws in [0, mx], mx inclusive."""
    if mx < 2**32:
        return [int(v) for v in rs.randint(0, mx + 1, size=count, dtype=np.uint32)]
    return [int(v) for v in rs.randint(0, mx + 1, size=count, dtype=np.uint64)]


def main():
    out = {"numpy": np.__version__, "seeds": []}
    for seed in SEEDS:
        rs = np.random.RandomState(seed)
        raw = [int(v) for v in rs._bit_generator.random_raw(RAW)]
        # randint over the full 32-bit range returns raw outputs unmasked.
        check = np.random.RandomState(seed).randint(0, 2**32, size=RAW, dtype=np.uint32)
        assert [int(v) for v in check] == raw
        intervals = []
        for mx in MAXES:
            rs = np.random.RandomState(seed)
            intervals.append({"max": str(mx), "values": [str(v) for v in bounded(rs, mx, 40)]})
        # shuffle's draws are random_interval(i) for i = n-1 .. 1: the same
        # as randint's masked draws, one per i, from the same stream.
        n = 50
        rs_a, rs_b = np.random.RandomState(seed), np.random.RandomState(seed)
        a = np.arange(n)
        rs_a.shuffle(a)
        b = list(range(n))
        for i in reversed(range(1, n)):
            j = bounded(rs_b, i, 1)[0]
            b[i], b[j] = b[j], b[i]
        assert list(a) == b, "shuffle is not Fisher-Yates over random_interval"
        assert rs_a._bit_generator.random_raw() == rs_b._bit_generator.random_raw()
        perms = {str(n): [int(v) for v in np.random.RandomState(seed).permutation(n)] for n in PERMS}
        out["seeds"].append({"seed": seed, "raw": raw, "intervals": intervals, "permutations": perms})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "randomstate.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
