"""Writes sums.json, the reference np.sum, np.mean and np.nanmean of
float64 vectors that package npsum must reproduce bit for bit.

NumPy sums float64 pairwise (numpy/_core/src/umath/loops_utils.h.src,
pairwise_sum), so a sum depends on the vectors' order and length in a way
a plain running sum does not follow once a vector has 8 values or more:
lengths 0..140 and 141..300 in steps of 7 cover the plain loop (< 8),
the eight-accumulator block (8..128) and the recursive split (> 128),
each with every remainder mod 8. The values of the first set span
eighteen orders of magnitude, signs mixed, so that the order of the
additions shows in the last bits; a second set holds Dice-like values in
[0, 1] as nnU-Net's summary.json averages them. About one value in eight
is NaN in every other vector of the first set and one in ten in the
second (np.nanmean's case); two vectors are NaN throughout, two are -0.0
throughout (np.sum starts from +0.0: the sum is +0.0).

Run with numpy 2.x (made with numpy 2.4.6; the summation has been the
same since numpy 1.9):

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy
    cd internal/npsum/testdata && /tmp/venv/bin/python make_fixtures.py

The vectors' values are written as float.hex less its trailing zeros
("0x1.5bp-12", "nan"), the results as Python's repr (shortest round-trip
digits, "nan"); strconv.ParseFloat reads both back exactly.
"""
import json
import re
import warnings

import numpy as np


def rep(v):
    return repr(float(v))


def hexrep(v):
    """float.hex without the trailing zeros ("0x1.5bp-12"); "nan"."""
    v = float(v)
    if v != v:
        return 'nan'
    if v == 0:
        return repr(v)  # "0.0", "-0.0"
    return re.sub(r'\.?0+p', 'p', v.hex())


def main():
    rng = np.random.RandomState(20240611)
    vectors = []
    # lengths 0..140, then every 7th to 300; wide magnitudes (k·2^e, |k| < 2^12, e in -30..30:
    # short in hex, yet their sums round), NaNs in every other one
    for n in list(range(0, 141)) + list(range(141, 301, 7)):
        x = rng.randint(-4095, 4096, n) * 2.0 ** rng.randint(-30, 31, n)
        if n % 2 == 1:
            x[rng.rand(n) < 0.125] = np.nan
        vectors.append(x)
    # Dice-like values in [0, 1], random lengths, some NaN
    for _ in range(48):
        n = int(rng.randint(1, 301))
        tp = rng.randint(0, 1000, n)
        fp = rng.randint(0, 300, n)
        fn = rng.randint(0, 300, n)
        x = 2 * tp / np.maximum(2 * tp + fp + fn, 1)
        x[rng.rand(n) < 0.1] = np.nan
        vectors.append(x.astype(np.float64))
    vectors.append(np.full(1, -0.0))
    vectors.append(np.full(9, -0.0))
    vectors.append(np.full(9, np.nan))
    vectors.append(np.full(200, np.nan))
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)  # empty and all-NaN means
        for x in vectors:
            assert x.dtype == np.float64 and x.flags.c_contiguous
            out.append({
                'x': [hexrep(v) for v in x],
                'sum': rep(np.sum(x)),
                'mean': rep(np.mean(x)),
                'nanmean': rep(np.nanmean(x)),
                # np.nanmean as nnU-Net calls it: on a list of numpy floats
                'nanmean_list': rep(np.nanmean([np.float64(v) for v in x])) if len(x) else 'nan',
            })
    for o in out:
        assert o['nanmean'] == o['nanmean_list'], o
        del o['nanmean_list']
    with open('sums.json', 'w') as f:
        json.dump({'numpy': np.__version__, 'vectors': out}, f, separators=(',', ':'))
        f.write('\n')


if __name__ == '__main__':
    main()
