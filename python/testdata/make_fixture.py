#!/usr/bin/env python3
"""Make python/testdata/torch_outputs.safetensors: what voxtrain_torch.py's
module computes for the run in testdata/run on testdata/input.safetensors.

The Go test python/loader_test.go (TestTorchLoaderMatchesCPU) holds
voxtrain's CPU device to these outputs. Regenerate after
`go test ./python -run TorchLoader -update` rewrote the run, with Debian's
interpreter and python3-torch (1.13.1) and python3-yaml (6.0):

    apt-get install python3-torch python3-yaml
    /usr/bin/python3 python/testdata/make_fixture.py
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import voxtrain_torch  # noqa: E402


def main():
    torch.set_num_threads(1)
    model = voxtrain_torch.load(os.path.join(HERE, "run"))
    x = voxtrain_torch.load_safetensors(os.path.join(HERE, "input.safetensors"))["input"]
    with torch.no_grad():
        outs = model(x)
    voxtrain_torch.save_safetensors(os.path.join(HERE, "torch_outputs.safetensors"), {f"output.{i}": o for i, o in enumerate(outs)})
    print(f"torch {torch.__version__}: {len(outs)} outputs", [tuple(o.shape) for o in outs])


if __name__ == "__main__":
    main()
