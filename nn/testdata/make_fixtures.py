#!/usr/bin/env python3
"""Generate the PyTorch reference fixtures of package nn.

Run with Debian's interpreter and python3-torch (1.13), from this folder:

    /usr/bin/python3 make_fixtures.py

It writes, next to itself, small safetensors files (with
python/voxtrain_torch.py's save_safetensors, so no safetensors package is
needed):

  unet_sgd.safetensors  UNet3D(in 1, classes 3, features 4-8-8, 3x3x3,
                        instance norm, LeakyReLU 0.01, conv bias), input
                        2x1x12^3, loss CE + soft Dice (per sample, no bg),
                        two steps of SGD(lr 0.01, momentum 0.99, Nesterov,
                        weight decay 3e-5) after clip_grad_norm_(12) on the
                        same batch: init weights, logits, loss, weights after
                        step 1 and 2.
  unet_adamw_ds.safetensors
                        UNet3D(in 2, classes 2, features 4-4-8-8, kernels
                        1x3x3 then 3x3x3, strides 1-(1,2,2)-2-2, instance
                        norm, ReLU, no conv bias, deep supervision), input
                        1x2x8x16x16, loss CE + batch soft Dice over the deep
                        supervision outputs (weights 2/3, 1/3, 0, labels
                        downsampled nearest-exact), two steps of AdamW(lr 1e-3,
                        weight decay 0.01) after clip_grad_norm_(12).
  losses.safetensors    soft skeleton (clDice, 3 iterations) of a random
                        2x2x6x7x8 volume and its input gradient; 0.5 soft Dice
                        + 0.5 clDice of softmax logits and its logit
                        gradient; BCEWithLogits(pos_weight 3) and its gradient.

Tensors are stored in PyTorch layout (NCDHW activations, (O,I,k,k,k) conv and
(I,O,k,k,k) transposed-conv weights) under their state_dict names, with
prefixes init./step1./step2. for weights.
"""
from pathlib import Path

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
# The network is the PyTorch loader's, the one users load runs with.
sys.path.insert(0, str(HERE.parent.parent / "python"))
import voxtrain_torch  # noqa: E402
from voxtrain_torch import UNet3D  # noqa: E402


def he_init(model, g):
    """nnU-Net's InitWeights_He(1e-2), drawing from generator g."""
    for m in model.modules():
        if isinstance(m, (nn.Conv3d, nn.ConvTranspose3d)):
            fan_in = m.weight.shape[1] * m.weight[0, 0].numel()
            std = (2 / (1 + 1e-4)) ** 0.5 / fan_in ** 0.5
            with torch.no_grad():
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * std)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
        if isinstance(m, nn.InstanceNorm3d):
            with torch.no_grad():
                m.weight.copy_(1 + 0.1 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))


def make_labels(n, shape, ncls, g):
    """Per sample, one random box of each foreground class on background."""
    t = torch.zeros(n, *shape)
    for i in range(n):
        for c in range(1, ncls):
            lo = [int(torch.randint(0, s // 2, (1,), generator=g)) for s in shape]
            hi = [lo[a] + max(1, shape[a] // 3) for a in range(3)]
            t[i, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] = c
    return t


def soft_dice_loss(p, y_onehot, batch, do_bg, smooth):
    axes = (0, 2, 3, 4) if batch else (2, 3, 4)
    inter = (p * y_onehot).sum(axes)
    ps, ts = p.sum(axes), y_onehot.sum(axes)
    dc = (2 * inter + smooth) / torch.clip(ps + ts + smooth, 1e-8)
    if not do_bg:
        dc = dc[1:] if batch else dc[:, 1:]
    return 1 - dc.mean()


def dice_ce(outs, y, ncls, batch, weights):
    total = 0
    for o, w in zip(outs, weights):
        yy = y
        if o.shape[2:] != y.shape[1:]:
            yy = F.interpolate(y[:, None], size=o.shape[2:], mode="nearest-exact")[:, 0]
        if w == 0:
            continue
        ce = F.cross_entropy(o, yy.long())
        oh = F.one_hot(yy.long(), ncls).permute(0, 4, 1, 2, 3).float()
        dice = soft_dice_loss(torch.softmax(o, 1), oh, batch, False, 1e-5)
        total = total + w * (ce + dice)
    return total


def ds_weights(n):
    w = [1 / 2 ** i for i in range(n)]
    if n > 1:
        w[-1] = 0
    s = sum(w)
    return [x / s for x in w]


def soft_erode(img):
    p1 = -F.max_pool3d(-img, (3, 1, 1), (1, 1, 1), (1, 0, 0))
    p2 = -F.max_pool3d(-img, (1, 3, 1), (1, 1, 1), (0, 1, 0))
    p3 = -F.max_pool3d(-img, (1, 1, 3), (1, 1, 1), (0, 0, 1))
    return torch.min(torch.min(p1, p2), p3)


def soft_dilate(img):
    return F.max_pool3d(img, (3, 3, 3), (1, 1, 1), (1, 1, 1))


def soft_open(img):
    return soft_dilate(soft_erode(img))


def soft_skel(img, iters):
    img1 = soft_open(img)
    skel = F.relu(img - img1)
    for _ in range(iters):
        img = soft_erode(img)
        img1 = soft_open(img)
        delta = F.relu(img - img1)
        skel = skel + F.relu(delta - skel * delta)
    return skel


def save(path, tensors):
    """Write a safetensors file (F32 only)."""
    voxtrain_torch.save_safetensors(path, tensors)
    print(f"wrote {path.name}: {len(tensors)} tensors, {path.stat().st_size} bytes")


def unet_fixture(path, model, x, y, ncls, batch_dice, make_opt):
    out = {"input": x, "labels": y}
    for k, v in model.state_dict().items():
        out["init." + k] = v.clone()
    opt = make_opt(model.parameters())
    for step in (1, 2):
        opt.zero_grad()
        outs = model(x)
        loss = dice_ce(outs, y, ncls, batch_dice, ds_weights(len(outs)))
        if step == 1:
            for i, o in enumerate(outs):
                out[f"logits.{i}"] = o.detach().clone()
            out["loss"] = loss.detach().reshape(1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 12)
        opt.step()
        for k, v in model.state_dict().items():
            out[f"step{step}." + k] = v.clone()
    save(path, out)


def main():
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(20240601)

    m = UNet3D(1, 3, (4, 8, 8))
    he_init(m, g)
    x = torch.randn(2, 1, 12, 12, 12, generator=g)
    y = make_labels(2, (12, 12, 12), 3, g)
    unet_fixture(HERE / "unet_sgd.safetensors", m, x, y, 3, False,
                 lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.99, nesterov=True, weight_decay=3e-5))

    m = UNet3D(2, 2, (4, 4, 8, 8), kernels=[(1, 3, 3)] + [(3, 3, 3)] * 3,
               strides=[(1, 1, 1), (1, 2, 2), (2, 2, 2), (2, 2, 2)], nonlin="relu", bias=False, ds=True)
    he_init(m, g)
    x = torch.randn(1, 2, 8, 16, 16, generator=g)
    y = make_labels(1, (8, 16, 16), 2, g)
    unet_fixture(HERE / "unet_adamw_ds.safetensors", m, x, y, 2, True,
                 lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01))

    out = {}
    v = torch.sigmoid(2 * torch.randn(2, 2, 6, 7, 8, generator=g)).requires_grad_()
    r = torch.randn(2, 2, 6, 7, 8, generator=g)
    s = soft_skel(v, 3)
    (s * r).sum().backward()
    out.update({"skel.input": v.detach(), "skel.weight": r, "skel.output": s.detach(), "skel.grad": v.grad})

    logits = (2 * torch.randn(2, 2, 8, 8, 8, generator=g)).requires_grad_()
    lab = make_labels(2, (8, 8, 8), 2, g)
    p = torch.softmax(logits, 1)
    oh = F.one_hot(lab.long(), 2).permute(0, 4, 1, 2, 3).float()
    dice = soft_dice_loss(p, oh, False, False, 1e-5)
    sp, st = soft_skel(p, 3), soft_skel(oh, 3)
    tprec = ((sp * oh)[:, 1:].sum() + 1) / (sp[:, 1:].sum() + 1)
    tsens = ((st * p)[:, 1:].sum() + 1) / (st[:, 1:].sum() + 1)
    cl = 1 - 2 * tprec * tsens / (tprec + tsens)
    loss = 0.5 * dice + 0.5 * cl
    loss.backward()
    out.update({"cldice.logits": logits.detach(), "cldice.labels": lab, "cldice.loss": loss.detach().reshape(1),
                "cldice.cl": cl.detach().reshape(1), "cldice.grad": logits.grad})

    z = (2 * torch.randn(2, 1, 8, 8, 8, generator=g)).requires_grad_()
    t = (torch.rand(2, 1, 8, 8, 8, generator=g) < 0.3).float()
    bce = F.binary_cross_entropy_with_logits(z, t, pos_weight=torch.tensor([3.0]))
    bce.backward()
    out.update({"bce.logits": z.detach(), "bce.labels": t[:, 0], "bce.loss": bce.detach().reshape(1), "bce.grad": z.grad})
    save(HERE / "losses.safetensors", out)


if __name__ == "__main__":
    main()
