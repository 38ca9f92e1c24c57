"""Reference fixtures for the Go safetensors reader/writer (not run by `make test`).

Needs torch and the `safetensors` package, e.g.
    /usr/bin/python3 -m venv --system-site-packages /tmp/stvenv
    /tmp/stvenv/bin/pip install safetensors
Then, from this directory:
    /tmp/stvenv/bin/python fixtures.py make    # writes python_written.safetensors
    /tmp/stvenv/bin/python fixtures.py check   # checks go_written.safetensors
(go_written.safetensors is written by `go test ./checkpoint/safetensors -run TestGoWrittenFixture -update`.)

Values follow formulas that the Go tests repeat (value(i, k) below), so neither
side needs the other's code.
"""
import os
import sys

import torch
from safetensors.torch import load_file, save, save_file

HERE = os.path.dirname(os.path.abspath(__file__))


def value(i, k):
    # Exactly representable in F16 and BF16 (at most 7 significant bits).
    return (i % 97) * 0.25 - 12.0 + k


def floats(shape, k, dtype):
    n = 1
    for s in shape:
        n *= s
    return torch.tensor([value(i, k) for i in range(n)], dtype=torch.float32).to(dtype).reshape(shape)


def python_tensors():
    return {
        "conv.weight": floats((4, 2, 3, 3, 3), 0, torch.float32),
        "conv.bias": floats((4,), 1, torch.float32),
        "half": floats((3, 5), 2, torch.float16),
        "bf": floats((2, 3), 3, torch.bfloat16),
        "f64": floats((5,), 4, torch.float64),
        "count": torch.tensor(123456789012, dtype=torch.int64),
        "idx": torch.tensor([i * 1000003 - 5000000 for i in range(4)], dtype=torch.int64),
        "empty": torch.zeros((0, 3), dtype=torch.float32),
        "ünï \"çødé\"\n": floats((2,), 5, torch.float32),
        "a<b>&c": floats((1, 1), 6, torch.float32),
    }


class Tiny(torch.nn.Module):
    """The module whose state dict go_written.safetensors holds."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Sequential(
            torch.nn.Conv3d(1, 4, 3, padding=1),
            torch.nn.InstanceNorm3d(4, affine=True),
            torch.nn.LeakyReLU(0.01),
        )
        self.head = torch.nn.Conv3d(4, 2, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def go_expected():
    # Same names, shapes and k as goWrittenTensors in the Go test.
    shapes = [
        ("encoder.0.weight", (4, 1, 3, 3, 3)),
        ("encoder.0.bias", (4,)),
        ("encoder.1.weight", (4,)),
        ("encoder.1.bias", (4,)),
        ("head.weight", (2, 4, 1, 1, 1)),
        ("head.bias", (2,)),
    ]
    return {name: floats(shape, k, torch.float32) for k, (name, shape) in enumerate(shapes)}


def make():
    save_file(python_tensors(), os.path.join(HERE, "python_written.safetensors"), metadata={"format": "pt"})
    print("wrote python_written.safetensors")


def check():
    path = os.path.join(HERE, "go_written.safetensors")
    got = load_file(path)
    want = go_expected()
    assert list(sorted(got)) == list(sorted(want)), (sorted(got), sorted(want))
    for name, w in want.items():
        g = got[name]
        assert g.dtype == torch.float32, (name, g.dtype)
        assert tuple(g.shape) == tuple(w.shape), (name, g.shape, w.shape)
        assert torch.equal(g, w), name
    model = Tiny()
    model.load_state_dict(got, strict=True)
    out = model(torch.ones((1, 1, 4, 4, 4)))
    assert tuple(out.shape) == (1, 2, 4, 4, 4)
    # Byte-identical to what the reference writer makes of the same tensors.
    with open(path, "rb") as f:
        data = f.read()
    ref = save(want, metadata={"format": "pt"})
    assert data == ref, "go_written.safetensors differs from safetensors.torch.save output"
    print("go_written.safetensors: loads with safetensors.torch, load_state_dict(strict=True) ok, byte-identical to the reference writer")


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]]()
