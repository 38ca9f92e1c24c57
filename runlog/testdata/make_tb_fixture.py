#!/usr/bin/env python3
"""Dump what TensorBoard's own readers see in runlog/testdata/tensorboard/.

The event files there were written by voxtrain's Go code from fixed inputs
(runlog/tensorboard_test.go, `go test ./runlog -run TestTensorBoardFixture
-update`). This script reads them with TensorBoard itself and writes the
scalars it sees -- per tag, [step, wall_time, value] in order, NaN and
+-Inf as strings, which JSON lacks -- to runlog/testdata/tensorboard.json,
which TestTensorBoardFixture compares with the scalars the Go code wrote.
Two readers: the data provider over a plugin EventMultiplexer (what
`tensorboard --logdir` serves its Scalars dashboard from; only tags it
recognises as scalars are listed) and the older EventAccumulator.

Run (outside the repository's build; `make test` needs no Python) with
tensorboard 2.21.0 (protobuf 7.36.2, numpy 2.4.6) on Python 3.11.7, from
the repository root:

    python3 -m venv /tmp/tbvenv
    /tmp/tbvenv/bin/pip install tensorboard==2.21.0
    /tmp/tbvenv/bin/python runlog/testdata/make_tb_fixture.py
"""

import json
import math
import os

import tensorboard
from tensorboard import context
from tensorboard.backend.event_processing import data_provider
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import plugin_event_multiplexer

HERE = os.path.dirname(os.path.abspath(__file__))
LOGDIR = os.path.join(HERE, "tensorboard")
OUT = os.path.join(HERE, "tensorboard.json")


def value(v):
    return v if math.isfinite(v) else repr(v)  # 'nan', 'inf', '-inf'


def from_data_provider():
    # 0: keep every point (the server keeps a sample of 1000 per tag).
    mux = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"scalars": 0})
    mux.AddRunsFromDirectory(LOGDIR)
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, LOGDIR)
    ctx = context.RequestContext()
    data = provider.read_scalars(
        ctx, experiment_id="", plugin_name="scalars", downsample=1 << 30
    )
    return {
        run: {
            tag: [[d.step, d.wall_time, value(d.value)] for d in points]
            for tag, points in sorted(tags.items())
        }
        for run, tags in sorted(data.items())
    }


def from_event_accumulator():
    acc = event_accumulator.EventAccumulator(
        LOGDIR, size_guidance={event_accumulator.SCALARS: 0}
    )
    acc.Reload()
    return {
        tag: [[e.step, e.wall_time, value(e.value)] for e in acc.Scalars(tag)]
        for tag in sorted(acc.Tags()["scalars"])
    }


def main():
    out = {
        "tensorboard_version": tensorboard.__version__,
        "files": sorted(os.listdir(LOGDIR)),
        "data_provider": from_data_provider(),
        "event_accumulator": from_event_accumulator(),
    }
    with open(OUT, "w") as f:
        f.write(compact(out) + "\n")


def compact(v, indent=""):
    """JSON with one line per tag: a curve's points on the tag's line."""
    if not isinstance(v, dict):
        return json.dumps(v)
    inner = indent + " "
    items = [f"{inner}{json.dumps(k)}: {compact(x, inner)}" for k, x in v.items()]
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"


if __name__ == "__main__":
    main()
