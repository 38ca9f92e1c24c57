#!/usr/bin/env bash
# Side-by-side benchmark of voxtrain's augment package against the scipy
# reference (/work/shared/bench/scipy_augment.py): one 128^3 patch with
# rotation + scaling + elastic from a 160x192x160 volume, image order 1,
# label order 0, ms per sample on one core. The two sides alternate
# (scipy, Go, scipy, Go, ...) REPEATS times, both pinned to the same core,
# and the medians are compared.
#
#   augment/bench/side_by_side.sh            # 3 rounds
#   REPEATS=5 CORE=1 augment/bench/side_by_side.sh
#
# Needs /usr/bin/python3 with numpy and scipy (Debian python3-scipy).
set -euo pipefail

REPEATS=${REPEATS:-3}
CORE=${CORE:-0}
BENCH=${BENCH:-/work/shared/bench}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cp -r "$BENCH" "$WORK/bench" # the reference scripts write next to themselves
(cd "$ROOT" && go test -c -o "$WORK/augment.test" ./augment)

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "go: $(go version | cut -d' ' -f3), python: $(/usr/bin/python3 -c 'import scipy, numpy; print("scipy", scipy.__version__, "numpy", numpy.__version__)')"
GOBENCH='^Benchmark(SpatialScipyEquivalent|SpatialAffine|SpatialCubic|PresetNNUNet|PresetNNUNetAllOn|CropOnly)$'
for i in $(seq 1 "$REPEATS"); do
	echo "--- round $i"
	(cd "$WORK/bench" && OMP_NUM_THREADS=1 taskset -c "$CORE" /usr/bin/python3 scipy_augment.py --repeats 7) | tee -a "$WORK/py.txt"
	(cd "$ROOT/augment" && GOMAXPROCS=1 taskset -c "$CORE" "$WORK/augment.test" -test.run '^$' \
		-test.bench "$GOBENCH" -test.benchtime 7x -test.cpu 1) | grep '^Benchmark' | tee -a "$WORK/go.txt"
done

/usr/bin/python3 - "$WORK/py.txt" "$WORK/go.txt" <<'PY'
import re, statistics, sys
py = open(sys.argv[1]).read()
go = open(sys.argv[2]).read()
parts = {k: [float(x) for x in re.findall(pat, py)] for k, pat in {
    "coordinates": r"coordinates \(rot\+scale\+elastic\) (\d+) ms",
    "image": r"image order1 (\d+) ms",
    "label": r"label order0 (\d+) ms",
    "total": r"total (\d+) ms"}.items()}
runs = {}
for name, ms in re.findall(r"^Benchmark(\w+)\s+\d+\s+\d+ ns/op\s+([\d.]+) ms/sample", go, re.M):
    runs.setdefault(name, []).append(float(ms))
med = statistics.median
print("\nmedians over %d rounds (ms per 128^3 sample, one core)" % len(parts["total"]))
print("  scipy map_coordinates: total %.0f = coordinates %.0f + image %.0f + label %.0f" % tuple(
    med(parts[k]) for k in ("total", "coordinates", "image", "label")))
for name, v in runs.items():
    print("  voxtrain %-24s %7.1f   (rounds: %s)" % (name, med(v), ", ".join("%.1f" % x for x in v)))
g = med(runs["SpatialScipyEquivalent"])
print("\nspeed-up, same work (rotation + scaling + elastic, image + label): %.1fx (ratio of medians)" % (med(parts["total"]) / g))
paired = [t / x for t, x in zip(parts["total"], runs["SpatialScipyEquivalent"])]
print("  per round (scipy round i / voxtrain round i): %s; median %.1fx" % (", ".join("%.1fx" % r for r in paired), med(paired)))
mc = [i + l for i, l in zip(parts["image"], parts["label"])]
print("speed-up vs scipy's two map_coordinates calls alone (no coordinates): %.1fx (ratio of medians)" % (med(mc) / g))
PY
