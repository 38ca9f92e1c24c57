package main

import (
	"strings"
	"testing"
)

func TestParseDeviceSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want deviceSpec
	}{
		{"cpu", deviceSpec{kind: "cpu"}},
		{" CPU ", deviceSpec{kind: "cpu"}},
		{"cuda", deviceSpec{kind: "cuda", math: "fp32", conv: "auto"}},
		{"gpu", deviceSpec{kind: "cuda", math: "fp32", conv: "auto"}},
		{"cuda:1", deviceSpec{kind: "cuda", ordinal: 1, math: "fp32", conv: "auto"}},
		{"cuda:0,tf32", deviceSpec{kind: "cuda", math: "tf32", conv: "auto"}},
		{"cuda:1,bf16", deviceSpec{kind: "cuda", ordinal: 1, math: "bf16", conv: "auto"}},
		{"cuda,fp32", deviceSpec{kind: "cuda", math: "fp32", conv: "auto"}},
		{"cuda:2,bf16,cudnn", deviceSpec{kind: "cuda", ordinal: 2, math: "bf16", conv: "cudnn"}},
		{"cuda, deterministic ,own,tf32", deviceSpec{kind: "cuda", math: "tf32", conv: "own", deterministic: true}},
	} {
		got, err := parseDeviceSpec(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseDeviceSpec(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"tpu", "cuda:-1", "cuda:x", "cuda,fp16", "", "cuda,bf16,tf32", "cuda,own,cudnn", "cuda,", "cpu,bf16"} {
		if _, err := parseDeviceSpec(bad); err == nil {
			t.Errorf("parseDeviceSpec(%q) accepted", bad)
		}
	}
}

func TestOpenComputeDevice(t *testing.T) {
	dev, err := openComputeDevice("cpu", 1)
	if err != nil || dev.Dev == nil || dev.Alloc == nil {
		t.Fatalf("cpu: %+v, %v", dev, err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if cudaBuilt {
		t.Skip("CUDA build: opening a GPU is the GPU suite's job")
	}
	_, err = openComputeDevice("cuda", 0)
	if err == nil || !strings.Contains(err.Error(), "built without CUDA support; build with -tags cuda (see docs/GPU.md)") {
		t.Errorf("cuda in the default build: %v", err)
	}
}
