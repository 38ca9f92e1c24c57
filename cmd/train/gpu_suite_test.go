package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

// TestGPUSuiteScript runs scripts/gpu_suite.sh, the one script a GPU
// session runs in its few minutes of device time, over fakes: gpu.test,
// python3 and nvidia-smi record their arguments, and train is this test
// binary, which parses every command line the script gives it (with
// --help appended, so nothing runs): a step whose flags train no longer
// takes, a shell error or a step that does not run fails here, in CI,
// rather than on the GPU.
func TestGPUSuiteScript(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("no timeout (coreutils)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, fakes, out := filepath.Join(dir, "bin"), filepath.Join(dir, "fakes"), filepath.Join(dir, "out")
	log := filepath.Join(dir, "calls.log")
	for _, d := range []string{bin, fakes} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := func(path, body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	record := `echo "$(basename "$0") $*" >> ` + log + "\n"
	script(filepath.Join(bin, "gpu.test"), record)
	script(filepath.Join(fakes, "python3"), record)
	script(filepath.Join(fakes, "nvidia-smi"), "echo fake GPU\n")
	// train: the arguments recorded (with the NCCL switch the nccl step
	// sets), then parsed by the real command tree; the demo leaves the
	// best checkpoint's folder the cli step validates and predicts with.
	script(filepath.Join(bin, "train"), `echo "train $* backend=${VOXTRAIN_DIST_BACKEND:-}" >> `+log+`
VOXTRAIN_TEST_MAIN=1 "`+exe+`" "$@" --help > /dev/null 2>&1 || echo "FLAGS REFUSED: train $*" >> `+log+`
if [ "$1" = demo ]; then mkdir -p "$5/demo/fold_0/run_0/checkpoints/best"; fi
`)

	cmd := exec.Command(bash, filepath.Join(testutil.RepoRoot(), "scripts", "gpu_suite.sh"), bin, out,
		"info", "tests", "bench", "ops", "torch", "compile", "demo", "nccl", "bf16mem", "cli")
	cmd.Env = append(os.Environ(), "PATH="+fakes+string(os.PathListSeparator)+os.Getenv("PATH"), "DEMO_EPOCHS=1",
		"DEMO_DEVICE=cuda cuda,bf16", "TAR_TO="+filepath.Join(dir, "out.tgz"),
		// The library searches find nothing to hand on: keep them fast.
		"VOXTRAIN_CUBLAS=none", "VOXTRAIN_CUDNN=none", "VOXTRAIN_NCCL=none", "RUNS_DIR="+filepath.Join(dir, "runs"))
	stdout, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gpu_suite.sh: %v\n%s", err, stdout)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	calls := string(b)
	runs := filepath.Join(dir, "runs")
	if strings.Contains(calls, "FLAGS REFUSED") || strings.Contains(string(stdout), "unknown step") {
		t.Errorf("the script gives train arguments it refuses:\n%s", calls)
	}
	for _, want := range []string{
		"gpu.test -test.v -test.timeout 140s -gpu.conv own",
		"gpu.test -test.v -test.timeout 140s -gpu.conv cudnn",
		"gpu.test -test.run ^$ -test.bench H2D|UNetStep$ -test.benchtime 5x",
		"gpu.test -test.run ^$ -test.bench UNetStepOps -test.benchtime 3x",
		"python3 gpu/testdata/torch_unet_step_cuda.py --steps 10 --warmup 3\n",
		"python3 gpu/testdata/torch_unet_step_cuda.py --steps 10 --warmup 3 --compile",
		"train demo --device cuda --output-dir " + runs + "/vxruns-cuda --epochs 1 backend=\n",
		"train demo --device cuda,bf16 --output-dir " + runs + "/vxruns-cuda-bf16 --epochs 1 backend=\n",
		"train demo --device cuda --output-dir " + runs + "/vxruns-nccl-nccl --epochs 1 backend=nccl\n",
		"train demo --device cuda --output-dir " + runs + "/vxruns-nccl-none --epochs 1 backend=\n",
		"train validate --checkpoint " + runs + "/vxruns-cuda-bf16/demo/fold_0/run_0/checkpoints/best --device cuda,bf16 --mirror --hd95 --output " + runs + "/vxval",
		"train predict --checkpoint " + runs + "/vxruns-cuda-bf16/demo/fold_0/run_0/checkpoints/best --device cuda --input testdata/demo/imagesTr/hippocampus_001.nii.gz --output " + runs + "/vxpred.nii.gz",
		"train info testdata/demo/imagesTr/hippocampus_001.nii.gz " + runs + "/vxpred.nii.gz",
		"train bench-step --device cuda,bf16 --config configs/nnunet_3d_fullres.yaml --batch 2 --patch 128 --steps 5",
		"python3 gpu/testdata/torch_unet_step_cuda.py --steps 5 --warmup 2 --configs nnunet-2x128 --maths bf16",
		"train bench-step --device cuda --batch 2 --patch 64",
	} {
		if !strings.Contains(calls, want) {
			t.Errorf("no call %q:\n%s", want, calls)
		}
	}
	if n := strings.Count(calls, "train bench-step --device cuda,bf16 --config configs/nnunet_3d_fullres.yaml"); n != 4 {
		t.Errorf("the nnU-Net bf16 bench-step ran %d times, want 4 (bf16mem's three modes, cli's one)", n)
	}
	for _, f := range []string{"info.txt", "gpu-tests-own.txt", "gpu-tests-cudnn.txt", "gpu-bench.txt", "gpu-ops.txt", "torch-cuda.txt",
		"torch-compile.txt", "demo-cuda.txt", "demo-cuda-bf16.txt", "nccl-demo-nccl.txt", "nccl-demo-none.txt", "bf16mem-default.txt",
		"bf16mem-VOXTRAIN-BF16-GRADIENTS-0.txt", "bf16mem-VOXTRAIN-BF16-ACTIVATIONS-0.txt", "bf16mem-torch.txt", "cli-bench-step.txt",
		"cli-validate.txt", "cli-predict.txt"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("no %s: %v", f, err)
		}
	}
	// What the fakes cannot parse, read from the sources: the cuda test
	// binary's flag and benchmarks, the PyTorch script's options and
	// configuration name.
	root := testutil.RepoRoot()
	for file, wants := range map[string][]string{
		"gpu/gpu_test.go":                      {`flag.String("gpu.conv"`},
		"gpu/bench_test.go":                    {"func BenchmarkH2D(", "func BenchmarkUNetStep("},
		"gpu/opsbench_test.go":                 {"func BenchmarkUNetStepOps(", "func BenchmarkUNetStepOpsByShape("},
		"gpu/testdata/torch_unet_step_cuda.py": {`"--steps"`, `"--warmup"`, `"--compile"`, `"--configs"`, `"--maths"`, `"nnunet-2x128"`},
	} {
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(string(src), w) {
				t.Errorf("gpu_suite.sh relies on %s in %s, which is not there", w, file)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.tgz")); err != nil {
		t.Errorf("TAR_TO: %v", err)
	}
	if n := strings.Count(string(stdout), ": exit 0 after"); n != 17 {
		t.Errorf("%d steps exited 0, want every one of 17:\n%s", n, stdout)
	}
}
