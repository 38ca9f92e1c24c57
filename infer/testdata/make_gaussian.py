#!/usr/bin/env python3
"""Writes gaussian_8x10x13.json: nnU-Net v2's compute_gaussian (nnunetv2/inference/
sliding_window_prediction.py) for tile (8, 10, 13), sigma_scale 1/8,
value_scaling_factor 10, reproduced with scipy. Run with Debian's python3-scipy."""
import json
import numpy as np
from scipy.ndimage import gaussian_filter

tile = (8, 10, 13)
tmp = np.zeros(tile)
center = [i // 2 for i in tile]
sigmas = [i * (1.0 / 8) for i in tile]
tmp[tuple(center)] = 1
g = gaussian_filter(tmp, sigmas, 0, mode="constant", cval=0)
g /= np.max(g) / 10
g[g == 0] = np.min(g[g != 0])
json.dump({"tile": tile, "map": g.ravel().tolist()}, open("gaussian_8x10x13.json", "w"))
