#!/usr/bin/env python3
"""Make checkpoint/torchpt/testdata: files torch.save wrote, for
checkpoint/torchpt's tests, and expected.json, what each holds as numpy
reads it back.

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch numpy
    /tmp/tv/bin/python checkpoint/torchpt/testdata/make_fixtures.py

- state_dict.pt: an OrderedDict state_dict with the dtypes and layouts a
  reader must get right: float32, float16, bfloat16, float64, int64 (a
  BatchNorm's num_batches_tracked), bool, a 0-d tensor, an empty tensor,
  a transposed (non-contiguous) view, and two views of one storage at
  different offsets.
- checkpoint.pth: a training checkpoint shaped like nnU-Net's
  checkpoint_final.pth: {"network_weights": state_dict, "optimizer_state":
  ..., "current_epoch": 5, "logging": {...numpy floats...}, "init_args":
  {...}, "trainer_name": ..., "inference_allowed_mirroring_axes": (0, 1,
  2)}.
- model.pt (torch.save of a module, not its state_dict), tensor.pt (one
  tensor), legacy.pt (_use_new_zipfile_serialization=False): refused.
- torch_init.pt: python/testdata/torch_init.safetensors's tensors saved
  with torch.save (the same weights --init-weights reads from both).
"""
import collections
import json
import os
import struct

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def values(t):
    return t.detach().to(torch.float64).contiguous().reshape(-1).tolist()


def main():
    g = torch.Generator().manual_seed(3)
    base = torch.randn(4, 6, generator=g)
    shared = torch.arange(10, dtype=torch.float32)
    sd = collections.OrderedDict()
    sd["conv.weight"] = torch.randn(2, 3, 3, 3, 3, generator=g)
    sd["conv.bias"] = torch.randn(2, generator=g)
    sd["half"] = torch.randn(5, generator=g).half()
    sd["bf16"] = torch.randn(3, 2, generator=g).bfloat16()
    sd["double"] = torch.randn(2, 2, generator=g).double()
    sd["bn.num_batches_tracked"] = torch.tensor(7)
    sd["mask"] = torch.tensor([True, False, True])
    sd["scalar"] = torch.tensor(2.5)
    sd["empty"] = torch.zeros(0, 3)
    sd["transposed"] = base.t()  # stride (1, 6)
    sd["view.a"] = shared[2:5]  # offset 2 into one storage
    sd["view.b"] = shared[6:10].view(2, 2)  # offset 6, the same storage
    torch.save(sd, os.path.join(HERE, "state_dict.pt"))

    expected = {}
    for k, v in sd.items():
        expected[k] = {"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", ""), "values": values(v)}
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump({"torch": torch.__version__, "tensors": expected}, f, indent=1)

    net = collections.OrderedDict((k, sd[k]) for k in ("conv.weight", "conv.bias"))
    torch.save({
        "network_weights": net,
        "optimizer_state": {"state": {0: {"momentum_buffer": torch.ones(2)}}, "param_groups": [{"lr": 0.01, "params": [0, 1]}]},
        "grad_scaler_state": None,
        "logging": {"mean_fg_dice": [np.float64(0.5), np.float32(0.25)], "epoch_end_timestamps": [1.0]},
        "current_epoch": 5,
        "init_args": {"plans": {"dataset_name": "Dataset004_Hippocampus"}, "configuration": "3d_fullres", "fold": 0,
                      "device": torch.device("cpu")},
        "trainer_name": "nnUNetTrainer",
        "inference_allowed_mirroring_axes": (0, 1, 2),
        "bytes": b"\x00\x01raw",
        "set": {1, 2},
    }, os.path.join(HERE, "checkpoint.pth"))

    torch.save(torch.nn.Linear(2, 2), os.path.join(HERE, "model.pt"))
    torch.save(torch.ones(3), os.path.join(HERE, "tensor.pt"))
    torch.save(net, os.path.join(HERE, "legacy.pt"), _use_new_zipfile_serialization=False)

    # python/testdata/torch_init.safetensors read without the safetensors
    # package: the header is JSON, the data F32 little-endian.
    path = os.path.join(ROOT, "python", "testdata", "torch_init.safetensors")
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    init = collections.OrderedDict()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        lo, hi = info["data_offsets"]
        init[name] = torch.from_numpy(np.frombuffer(data[lo:hi], dtype="<f4").copy()).reshape(info["shape"])
    torch.save(init, os.path.join(HERE, "torch_init.pt"))


if __name__ == "__main__":
    main()
