#!/usr/bin/env python3
"""Make python/testdata/torch_init.safetensors: the state_dict of a
PyTorch-initialised voxtrain_torch.UNet3D, written as
safetensors.torch.save_file(model.state_dict(), path) writes it, for the
fine-tuning tests (cmd/train/init_test.go: train --init-weights).

The network is 1 input channel, 3 classes, features 4-8-16, deep
supervision (so the file has the head and one deep-supervision head, ds.0),
otherwise voxtrain's defaults (3x3x3, instance norm, LeakyReLU 0.01, conv
bias): in a config,

    model: {in_channels: 1, num_classes: 3, features: [4, 8, 16], deep_supervision: true}

Its weights are PyTorch's default initialisation (seed 17), each parameter
then moved by 0.01 * N(0, 1) so that the norms' scales and shifts are not 1
and 0: nothing in it equals what voxtrain's own initialisation draws.

Made with Debian's interpreter and python3-torch (1.13.0a0), which has no
safetensors package: save_file is used when `import safetensors.torch`
works, else voxtrain_torch.save_safetensors writes the same layout (no
__metadata__, tensors sorted by name, all F32, the header padded with
spaces to 8 bytes):

    apt-get install python3-torch python3-yaml
    /usr/bin/python3 python/testdata/make_init_fixture.py
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import voxtrain_torch  # noqa: E402

OUT = os.path.join(HERE, "torch_init.safetensors")


def main():
    torch.manual_seed(17)
    model = voxtrain_torch.UNet3D(cin=1, ncls=3, features=(4, 8, 16), ds=True)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    state = model.state_dict()
    try:
        from safetensors.torch import save_file
    except ImportError:
        def save_file(tensors, path):  # save_file's order: sorted by name
            voxtrain_torch.save_safetensors(path, dict(sorted(tensors.items())))
    save_file(state, OUT)
    print(f"torch {torch.__version__}: {len(state)} tensors, {sum(t.numel() for t in state.values())} values -> {OUT}")
    # The file reads back as the state_dict.
    back = voxtrain_torch.load_safetensors(OUT)
    assert back.keys() == state.keys() and all(torch.equal(back[k], state[k]) for k in state)


if __name__ == "__main__":
    main()
