# voxtrain — build, test, fuzz and benchmark targets.
# `make test` is what CI runs (through .ci/run): gofmt check, go vet,
# the race-enabled test suite and the fuzz-corpus replay.

GO        ?= go
PKGS      := ./...
FUZZTIME  ?= 60s
BIN       := bin/train

.PHONY: all build test fmt-check vet race fuzz bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/train

test: fmt-check vet race

fmt-check:
	@out="$$(gofmt -l .)"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	@echo "gofmt: ok"

vet:
	$(GO) vet $(PKGS)

# The fuzz targets' committed seed corpora (testdata/fuzz/...) are replayed
# as ordinary test cases by `go test`, so this also replays the corpus.
race:
	$(GO) test -race -timeout 20m $(PKGS)

# Run each fuzz target for FUZZTIME (go test -fuzz takes one target at a time).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseHeader$$' -fuzztime $(FUZZTIME) ./nifti
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./nifti

bench:
	$(GO) test -run '^$$' -bench . -benchtime 20x ./nifti

clean:
	rm -rf bin
