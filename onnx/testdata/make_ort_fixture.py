#!/usr/bin/env python3
"""onnxruntime's outputs for the golden models of package onnx (not run by `make test`).

Run (this commit's fixtures) with onnx 1.23.2, onnxruntime 1.32.0 and numpy
2.4.6 on Python 3.11, in a scratch virtualenv outside the repository:

    python3 -m venv /tmp/onnxvenv
    /tmp/onnxvenv/bin/pip install onnxruntime onnx numpy
    /tmp/onnxvenv/bin/python onnx/testdata/make_ort_fixture.py

For each NAME in FIXTURES it reads NAME.onnx and NAME.input.f32 (both written
by `go test ./onnx -run TestGolden -update`) and

  - runs onnx.checker.check_model(full_check=True) (structure, operator
    schemas of opset 17, shape inference);
  - checks that protobuf's own serialiser gives the file's bytes back (the
    Go encoder writes canonical protobuf);
  - checks the inferred output shape against the input's (N, K, D, H, W);
  - runs the model with onnxruntime (CPUExecutionProvider, one thread) on the
    input, float32 NCDHW of the shape given here, and writes the logits to
    NAME.ort.f32, raw little-endian float32 NCDHW, which TestMatchesOnnxruntime
    compares with voxtrain's CPU device.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (input shape N, C, D, H, W; classes) -- as in onnx/unet_test.go.
FIXTURES = {
    "unet_small": ((1, 1, 16, 12, 8), 3),
    "unet_variant": ((2, 2, 8, 12, 16), 2),
    "unet_resenc": ((1, 1, 8, 12, 16), 3),
}


def main():
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}, python {sys.version.split()[0]}")
    for name, (shape, classes) in FIXTURES.items():
        path = os.path.join(HERE, name + ".onnx")
        raw = open(path, "rb").read()
        model = onnx.load_from_string(raw)
        onnx.checker.check_model(model, full_check=True)
        if model.SerializeToString() != raw:
            sys.exit(f"{path}: protobuf re-serialises it to different bytes")
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        out = inferred.graph.output[0].type.tensor_type.shape.dim
        got = [d.dim_param or d.dim_value for d in out]
        if got != ["N", classes, "D", "H", "W"]:
            sys.exit(f"{path}: output shape {got}")

        x = np.fromfile(os.path.join(HERE, name + ".input.f32"), dtype="<f4").reshape(shape)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(raw, opts, providers=["CPUExecutionProvider"])
        (logits,) = sess.run(["logits"], {"input": x})
        want = (shape[0], classes) + shape[2:]
        if logits.shape != want or logits.dtype != np.float32:
            sys.exit(f"{path}: logits {logits.shape} {logits.dtype}, want {want} float32")
        logits.astype("<f4").tofile(os.path.join(HERE, name + ".ort.f32"))
        print(f"{name}: checker ok, logits {logits.shape}, |max| {np.abs(logits).max():.4g}")


if __name__ == "__main__":
    main()
