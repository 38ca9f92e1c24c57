#!/usr/bin/env python3
"""Make python/testdata/torch_outputs*.safetensors: what voxtrain_torch.py's
module computes for a run in testdata on its input.

    run         testdata/run on testdata/input.safetensors ->
                testdata/torch_outputs.safetensors
    run_resenc  testdata/run_resenc (model.encoder: residual) on
                testdata/input_resenc.safetensors ->
                testdata/torch_outputs_resenc.safetensors

The Go test python/loader_test.go (TestTorchLoaderMatchesCPU) holds
voxtrain's CPU device to these outputs. Regenerate after
`go test ./python -run TorchLoader -update` rewrote the runs, naming the
runs to remake (all when none is named). `run` was made with Debian's
interpreter and python3-torch (1.13.1) and python3-yaml (6.0):

    apt-get install python3-torch python3-yaml
    /usr/bin/python3 python/testdata/make_fixture.py run

`run_resenc` with torch 2.15.0 (run on the CPU) and PyYAML 6.0.4 from PyPI in a
scratch virtualenv outside the repository:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch pyyaml
    /tmp/venv/bin/python python/testdata/make_fixture.py run_resenc
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import voxtrain_torch  # noqa: E402


RUNS = {
    "run": ("input.safetensors", "torch_outputs.safetensors"),
    "run_resenc": ("input_resenc.safetensors", "torch_outputs_resenc.safetensors"),
}


def main():
    torch.set_num_threads(1)
    for name in sys.argv[1:] or RUNS:
        inp, out = RUNS[name]
        model = voxtrain_torch.load(os.path.join(HERE, name))
        x = voxtrain_torch.load_safetensors(os.path.join(HERE, inp))["input"]
        with torch.no_grad():
            outs = model(x)
        voxtrain_torch.save_safetensors(os.path.join(HERE, out), {f"output.{i}": o for i, o in enumerate(outs)})
        print(f"{name}: torch {torch.__version__}: {len(outs)} outputs", [tuple(o.shape) for o in outs])


if __name__ == "__main__":
    main()
