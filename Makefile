# voxtrain — build, test, fuzz, benchmark and kernel targets.
# `make test` is what CI runs (through .ci/run).

GO        ?= go
FUZZTIME  ?= 60s
BIN       := bin/train
SHELL     := /bin/bash
.SHELLFLAGS := -o pipefail -c

# Every package but the kernel emulation, which `emu` runs verbosely.
PKGS = $$($(GO) list ./... | grep -v /kernels/emu$$)
# The race detector and the kernel emulation need cgo (a C/C++ compiler);
# Go turns cgo off by itself where there is none.
CGO := $(shell $(GO) env CGO_ENABLED)

.PHONY: all build test fmt-check vet race emu ptx-check cuda-check slow fuzz bench kernels clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/train

# gofmt, go vet, the race-enabled suite (which replays the fuzz corpora in
# testdata/fuzz as ordinary test cases), every CUDA kernel against the CPU
# device under host emulation, PTX staleness, the cuda build (when the CUDA
# toolkit is installed; skipped with the reason otherwise) and the tests too
# slow for the race detector.
#
# The parts run two at a time (each target's output kept together): the
# README's demo in `slow`, the longest single part (two cores for about 7
# minutes on a 2-core VM), starts first, and the rest fill the cores it
# leaves idle (its data loading, validation and checkpoints; the link and
# single-package stretches of the race-enabled suite). From a cold build
# cache on a 2-core VM: 23 m 46 s one after another, 18 m 52 s two at a
# time (docs/BENCHMARKS.md).
TEST_PARTS = fmt-check slow race vet emu ptx-check cuda-check
test:
	@$(MAKE) --no-print-directory -j2 --output-sync=target $(TEST_PARTS)

fmt-check:
	@out="$$(gofmt -l .)"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	@echo "gofmt: ok"

vet:
	$(GO) vet ./...

race:
ifeq ($(CGO),1)
	$(GO) test -race -timeout 30m $(PKGS)
else
	@echo "race detector skipped: it needs cgo (a C compiler); running the tests without -race"
	@$(GO) run ./scripts/internal/raceskipped -run > /dev/null
	$(GO) test -timeout 30m -skip "$(RACE_SKIPPED)" $(PKGS)
endif

# The ucontext pass checks the fibers, not the kernels (the pass above does):
# it leaves out the two tests of the most blocks, half its time
# (swapcontext makes a system call at every switch); the other barrier and
# shared-memory kernels' tests (TestInstanceNorm, TestInstanceNormVectorPath,
# TestInstanceNormBackwardBF16G, TestChannelBiasAndSum, ...) still run there.
UCONTEXT_SKIP = ^(TestReduceChunksStride|TestInstanceNormBF16)$$

# The emulated kernels print one "kernel X vs CPU reference Y: max abs err E
# (tol T)" line each; show those and the verdicts.
emu:
ifeq ($(CGO),1)
	$(GO) test -race -count=1 -v ./kernels/emu | grep -E 'kernel .* vs |^(--- FAIL|FAIL|ok|PASS)|skipped|panic'
	@echo "the same over ucontext fibers (the path of hosts other than x86-64), but the two largest grids:"
	CGO_CXXFLAGS="-O2 -DVT_EMU_UCONTEXT" $(GO) test -count=1 -skip "$(UCONTEXT_SKIP)" ./kernels/emu
else
	@echo "CUDA kernel emulation skipped: it needs cgo and a C++20 compiler (g++ 12 or later)"
endif

ptx-check:
	kernels/check_ptx.sh

cuda-check:
	scripts/cuda_check.sh

# Every test that skips itself under the race detector (it calls
# testutil.SkipUnderRace; scripts/internal/raceskipped finds them), run once
# without it: among them the README's demo (configs/demo.yaml, fold 0)
# trained end to end and held to its validation Dice threshold, nnU-Net's
# workflow end to end, the planner held to nnU-Net's plans of the demo, the
# trainer's SIGKILL-during-saves test and the gzip decoder's full matrices.
RACE_SKIPPED = $$($(GO) run ./scripts/internal/raceskipped -run)
slow:
	@$(GO) run ./scripts/internal/raceskipped -run > /dev/null
	$(GO) test -count=1 -timeout 20m -run "$(RACE_SKIPPED)" -v $$($(GO) run ./scripts/internal/raceskipped -pkgs) \
		| grep -E '^(--- |ok|FAIL|PASS)|demo took|kills|loss|Dice'

# Run each fuzz target for FUZZTIME (go test -fuzz takes one target at a
# time). Minimising each new input is capped at 50 runs: the default (60 s
# of minimising per input) spends a one-minute run on the first few inputs
# of the targets whose runs write files (a handful of executions).
FUZZ = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 50x
fuzz:
	$(FUZZ) -fuzz '^FuzzParseHeader$$' ./nifti
	$(FUZZ) -fuzz '^FuzzDecode$$' ./nifti
	$(FUZZ) -fuzz '^FuzzParse$$' ./checkpoint/safetensors
	$(FUZZ) -fuzz '^FuzzRead$$' ./checkpoint/torchpt
	$(FUZZ) -fuzz '^FuzzReader$$' ./internal/inflate
	$(FUZZ) -fuzz '^FuzzReaderStream$$' ./internal/inflate
	$(FUZZ) -fuzz '^FuzzOpen$$' ./nrrd
	$(FUZZ) -fuzz '^FuzzOpen$$' ./metaimage
	$(FUZZ) -fuzz '^FuzzOpen$$' ./tiff
	for t in FuzzBlosc FuzzBlosclz FuzzV2Metadata FuzzV3Metadata FuzzShard FuzzN5Block FuzzN5LZ4 FuzzN5Attributes FuzzCOSEMMultiscales; do \
		$(FUZZ) -fuzz "^$$t\$$" ./zarr || exit 1; done
	$(FUZZ) -fuzz '^FuzzDerivedPaths$$' ./volume

bench:
	$(GO) test -run '^$$' -bench . -benchtime 20x ./nifti
	$(GO) test -run '^$$' -bench 'UNetStep$$' ./cpu

# Regenerate the committed PTX (needs nvcc; see kernels/gen_ptx.sh).
kernels:
	kernels/gen_ptx.sh

clean:
	rm -rf bin
