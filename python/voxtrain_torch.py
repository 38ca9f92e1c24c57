"""voxtrain's U-Net in PyTorch: build it from a run's config.yaml, load its weights.

For users who train with voxtrain and stay in PyTorch for everything else
(inference in an existing pipeline, fine-tuning, export)::

    import voxtrain_torch
    model = voxtrain_torch.load("runs/demo/fold_0/run_0")        # best checkpoint
    model = voxtrain_torch.load("runs/demo/fold_0/run_0/checkpoints/last")
    logits = model(x)[0]      # x: (N, C, D, H, W) float32, as voxtrain's NIfTI axes (z, y, x)

`load` builds the module from the `model:` section of the run's config.yaml
and loads model.safetensors (PyTorch names and layouts, float32) into it;
`build(model_section)` builds an untrained one. The forward pass returns a
list of logits, highest resolution first (one entry without deep
supervision), as voxtrain's network computes them: voxtrain's own tests hold
this module's outputs to its CPU device's (python/testdata).

The other way, weights trained or changed in PyTorch start a voxtrain run
(fine-tuning; `train --init-weights`)::

    safetensors.torch.save_file(model.state_dict(), "unet.safetensors")
    # train --config my.yaml --init-weights unet.safetensors [--init-mismatch skip]
    torch.save(model.state_dict(), "unet.pt")  # read as well (no Python on voxtrain's side)
    # train --config my.yaml --init-weights unet.pt

Needs torch and PyYAML; nothing of voxtrain at run time. The state_dict
keys are voxtrain's (enc.L.B.0.weight, up.D.weight, dec.D.B.1.bias, head,
ds.D); the weights are nnU-Net's PlainConvUNet's after a key rename.
"""
import json
import os
import struct

import torch
import torch.nn as nn

__all__ = ["UNet3D", "build", "load", "load_safetensors", "read_config", "save_safetensors"]


class ConvBlock(nn.Sequential):
    """Conv3d -> [InstanceNorm3d(affine)] -> [LeakyReLU | ReLU]."""

    def __init__(self, cin, cout, k, stride, norm, nonlin, slope, bias, eps=1e-5):
        pad = tuple((kk - 1) // 2 for kk in k)
        mods = [nn.Conv3d(cin, cout, k, stride=stride, padding=pad, bias=bias)]
        if norm == "instance":
            mods.append(nn.InstanceNorm3d(cout, eps=eps, affine=True))
        if nonlin == "leaky_relu":
            mods.append(nn.LeakyReLU(slope))
        elif nonlin == "relu":
            mods.append(nn.ReLU())
        super().__init__(*mods)


class ResBlock(nn.Module):
    """nnU-Net's BasicBlockD as voxtrain's nn builds it (state_dict keys
    conv1.*, conv2.*, skip.*): act(conv2(conv1(x)) + skip(x)), conv2 without
    nonlinearity; the skip is AvgPool3d(stride) when the block strides, then
    a 1x1x1 conv without bias and a norm when the channels change."""

    def __init__(self, cin, cout, k, stride, norm, nonlin, slope, bias, eps=1e-5):
        super().__init__()
        stride = tuple(stride) if isinstance(stride, (tuple, list)) else (stride,) * 3
        self.conv1 = ConvBlock(cin, cout, k, stride, norm, nonlin, slope, bias, eps)
        self.conv2 = ConvBlock(cout, cout, k, 1, norm, "none", slope, bias, eps)
        self.pool = nn.AvgPool3d(stride, stride) if stride != (1, 1, 1) else nn.Identity()
        self.skip = ConvBlock(cin, cout, (1, 1, 1), 1, norm, "none", slope, False, eps) if cin != cout else nn.Identity()
        if nonlin == "leaky_relu":
            self.act = nn.LeakyReLU(slope)
        elif nonlin == "relu":
            self.act = nn.ReLU()
        else:
            self.act = nn.Identity()

    def forward(self, x):
        return self.act(self.conv2(self.conv1(x)) + self.skip(self.pool(x)))


class UNet3D(nn.Module):
    """The network of voxtrain's nn.UNet, state_dict keys included.

    With the defaults (features 16-32-64-128, 3x3x3, strides 1-2-2-2) it is
    voxtrain's reference network (config.Default().Model).
    """

    def __init__(self, cin=1, ncls=2, features=(16, 32, 64, 128), kernels=None, strides=None,
                 convs=2, norm="instance", nonlin="leaky_relu", slope=0.01, bias=True, ds=False, eps=1e-5,
                 residual_blocks=None, decoder_convs=None):
        super().__init__()
        L = len(features)
        kernels = kernels or [(3, 3, 3)] * L
        strides = strides or [(1, 1, 1)] + [(2, 2, 2)] * (L - 1)
        decoder_convs = decoder_convs or convs
        self.L, self.use_ds = L, ds
        blk = lambda i, o, k, s: ConvBlock(i, o, k, s, norm, nonlin, slope, bias, eps)
        prev = cin
        if residual_blocks:
            # model.encoder: residual (nnU-Net's ResidualEncoderUNet): a
            # stem conv block, then residual blocks, the first of a level
            # with its stride.
            self.stem = blk(prev, features[0], kernels[0], 1)
            prev = features[0]
        self.enc = nn.ModuleList()
        for l, f in enumerate(features):
            if residual_blocks:
                res = lambda i, s: ResBlock(i, f, kernels[l], s, norm, nonlin, slope, bias, eps)
                self.enc.append(nn.Sequential(res(prev, strides[l]), *[res(f, 1) for _ in range(residual_blocks[l] - 1)]))
            else:
                self.enc.append(nn.Sequential(blk(prev, f, kernels[l], strides[l]),
                                              *[blk(f, f, kernels[l], 1) for _ in range(convs - 1)]))
            prev = f
        self.up, self.dec = nn.ModuleList(), nn.ModuleList()
        for d in range(L - 1):
            l = L - 2 - d
            self.up.append(nn.ConvTranspose3d(features[l + 1], features[l], strides[l + 1], stride=strides[l + 1]))
        for d in range(L - 1):
            l = L - 2 - d
            f = features[l]
            self.dec.append(nn.Sequential(blk(2 * f, f, kernels[l], 1),
                                          *[blk(f, f, kernels[l], 1) for _ in range(decoder_convs - 1)]))
        self.head = nn.Conv3d(features[0], ncls, 1)
        if ds:
            self.ds = nn.ModuleList(nn.Conv3d(features[L - 2 - d], ncls, 1) for d in range(L - 2))

    def forward(self, x):
        skips = []
        if hasattr(self, "stem"):
            x = self.stem(x)
        for lvl in self.enc:
            x = lvl(x)
            skips.append(x)
        outs = []
        for d, (up, dec) in enumerate(zip(self.up, self.dec)):
            l = self.L - 2 - d
            x = dec(torch.cat([up(x), skips[l]], dim=1))
            if self.use_ds and d < self.L - 2:
                outs.append(self.ds[d](x))
        out = self.head(x)
        return [out] + outs[::-1]  # highest resolution first


def build(model):
    """Build an untrained UNet3D from a config.yaml `model:` section (a dict)."""
    features = [int(f) for f in model["features"]]
    L = len(features)
    kernels = [tuple(int(v) for v in k) for k in (model.get("kernel_sizes") or [])]
    if len(kernels) == 1:
        kernels = kernels * L
    strides = [tuple(int(v) for v in s) for s in (model.get("strides") or [])]
    encoder = model.get("encoder") or "plain"
    residual_blocks = None
    if encoder == "residual":
        residual_blocks = [int(b) for b in model["blocks_per_level"]]
        if len(residual_blocks) == 1:
            residual_blocks = residual_blocks * L
    elif encoder != "plain":
        raise ValueError(f"model.encoder: {encoder!r}, want plain or residual")
    return UNet3D(
        cin=int(model.get("in_channels", 1)),
        ncls=int(model.get("num_classes", 2)),
        features=features,
        kernels=kernels or None,
        strides=strides or None,
        convs=int(model.get("convs_per_level", 2)),
        norm=model.get("norm", "instance"),
        nonlin=model.get("nonlinearity", "leaky_relu"),
        slope=float(model.get("negative_slope", 0.01)),
        bias=bool(model.get("conv_bias", True)),
        ds=bool(model.get("deep_supervision", False)),
        eps=float(model.get("norm_eps", 1e-5)),
        residual_blocks=residual_blocks,
        decoder_convs=int(model.get("decoder_convs") or 0) or None,
    )


def read_config(path):
    """Read a voxtrain config.yaml (needs PyYAML)."""
    import yaml
    with open(path) as f:
        return yaml.safe_load(f)


_DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16}


def load_safetensors(path):
    """Read a .safetensors file into a dict of float32 tensors (no safetensors package needed)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        lo, hi = spec["data_offsets"]
        t = torch.frombuffer(bytearray(data[lo:hi]), dtype=_DTYPES[spec["dtype"]]) if hi > lo else \
            torch.empty(0, dtype=_DTYPES[spec["dtype"]])
        out[name] = t.reshape(spec["shape"]).to(torch.float32)
    return out


def save_safetensors(path, tensors):
    """Write tensors (name -> tensor, in the dict's order) as a float32
    .safetensors file without metadata, as safetensors.torch.save_file lays
    it out (no safetensors package needed): e.g. weights for
    `train --init-weights`."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().contiguous().to(torch.float32).cpu().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def _locate(path):
    """Return (config.yaml, model.safetensors) for a run directory (its best,
    else last checkpoint), a checkpoint directory or pointer, or a
    model.safetensors inside a checkpoint."""
    path = os.path.abspath(path)
    if os.path.isfile(path):
        ckpt = os.path.dirname(path)
        weights = path
    else:
        ckpt = path
        if os.path.isdir(os.path.join(path, "checkpoints")):
            for name in ("best", "last"):
                p = os.path.join(path, "checkpoints", name)
                if os.path.exists(p):
                    ckpt = p
                    break
            else:
                raise FileNotFoundError(f"{path}: no checkpoints/best or checkpoints/last")
        if os.path.isfile(ckpt) and not ckpt.endswith(".safetensors"):
            # A pointer written as a file on filesystems without symlinks.
            with open(ckpt) as f:
                ckpt = os.path.join(os.path.dirname(ckpt), f.read().strip())
        weights = os.path.join(ckpt, "model.safetensors")
    for cand in (os.path.join(ckpt, "config.yaml"), os.path.join(ckpt, "..", "..", "config.yaml")):
        if os.path.isfile(cand):
            return os.path.normpath(cand), weights
    raise FileNotFoundError(f"{path}: no config.yaml beside the checkpoint or in its run directory")


def load(path, map_location="cpu"):
    """Build the network of a voxtrain run or checkpoint and load its weights (eval mode)."""
    cfg_path, weights = _locate(path)
    model = build(read_config(cfg_path)["model"])
    state = load_safetensors(weights)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise KeyError(f"{weights}: tensors missing {missing}, unexpected {unexpected} for the model of {cfg_path}")
    return model.to(map_location).eval()


if __name__ == "__main__":
    import sys
    m = load(sys.argv[1])
    print(m)
    print(sum(p.numel() for p in m.parameters()), "parameters")
