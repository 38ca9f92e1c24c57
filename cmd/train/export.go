package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/onnx"
)

// ExportOptions are `train export`'s.
type ExportOptions struct {
	IO         *IOStreams
	OpenDevice func(spec string, threads int) (*ComputeDevice, error)
	// Version is stored as the ONNX model's producer_version.
	Version string

	// Checkpoint is what validate and predict take (a checkpoint
	// directory or a last/best pointer); ONNX the file written.
	Checkpoint string
	ONNX       string
}

// NewCmdExport builds `train export`; runF (nil: exportRun) receives the
// options.
func NewCmdExport(f *Factory, runF func(context.Context, *ExportOptions) error) *cobra.Command {
	opts := &ExportOptions{IO: f.IO, OpenDevice: f.OpenDevice, Version: f.Version}
	cmd := &cobra.Command{
		Use:   "export --checkpoint C --onnx model.onnx",
		Short: "Write a trained U-Net as an ONNX model (opset 17) for onnxruntime and other runtimes",
		Long: fmt.Sprintf(`export writes the network of a checkpoint as an ONNX model (opset %d, IR
version %d): Conv, InstanceNormalization, LeakyRelu or Relu, ConvTranspose and
Concat, with the trained weights.

Input "input": float32 (N, C, D, H, W), channels first as in PyTorch, with
dynamic N, D, H, W; each spatial size must be a multiple of the product of
the strides along its axis (metadata voxtrain.spatial_multiple, e.g. 8,8,8
for four levels), so run it on patches (metadata voxtrain.patch_size, the
training patch) by sliding window as predict does. The input must be
preprocessed as in training: the data section of the checkpoint's
config.yaml (metadata voxtrain.normalization, and voxtrain.target_spacing
when resampled, in voxtrain.spacing_unit when the config records it; an
axis of 0 keeps the input's own spacing along it, as a 2d model's across
its slices).

Output "logits": float32 (N, K, D, H, W) of the full-resolution head, the
one inference uses; the lower-resolution heads of deep supervision only
serve the training loss and are not exported. Softmax over axis 1 (a
sigmoid for one class) gives probabilities, argmax labels.`, onnx.Opset, onnx.IRVersion),
		Example: `  train export --checkpoint runs/demo/fold_0/run_0/checkpoints/best --onnx hippocampus.onnx
  python -c "import onnxruntime as ort; print(ort.InferenceSession('hippocampus.onnx').get_inputs())"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case opts.Checkpoint == "":
				return usageErr(cmd, errors.New("--checkpoint is required"))
			case opts.ONNX == "":
				return usageErr(cmd, errors.New("--onnx is required (the .onnx file to write)"))
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return exportRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Checkpoint, "checkpoint", "", "checkpoint directory, or a run's checkpoints/best or checkpoints/last")
	cmd.Flags().StringVarP(&opts.ONNX, "onnx", "o", "", "ONNX model file to write (replaced atomically)")
	return cmd
}

// exportRun loads the checkpoint's network on the CPU (the weights only
// pass through it) and writes its ONNX model.
func exportRun(opts *ExportOptions) error {
	// The output is checked before the model is loaded and converted.
	if fi, err := os.Stat(opts.ONNX); err == nil && fi.IsDir() {
		return fmt.Errorf("--onnx %s: is a directory; give the .onnx file to write", opts.ONNX)
	}
	if fi, err := os.Stat(filepath.Dir(opts.ONNX)); err != nil {
		return fmt.Errorf("--onnx %s: its folder: %w", opts.ONNX, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("--onnx %s: %s is not a folder", opts.ONNX, filepath.Dir(opts.ONNX))
	}
	dev, err := opts.OpenDevice("cpu", 1)
	if err != nil {
		return err
	}
	defer dev.Close()
	net, cfg, err := infer.LoadNet(opts.Checkpoint, dev.Dev)
	if err != nil {
		return err
	}
	defer net.Free()
	params, err := nn.ExportParams(dev.Dev, net.Params())
	if err != nil {
		return err
	}
	p := cfg.Train.PatchSize
	meta := []onnx.Property{
		{Key: "voxtrain.patch_size", Value: fmt.Sprintf("%d,%d,%d", p[0], p[1], p[2])},
		{Key: "voxtrain.normalization", Value: strings.Join(cfg.Data.Normalization, ",")},
	}
	if s := cfg.Data.TargetSpacing; len(s) > 0 {
		meta = append(meta, onnx.Property{Key: "voxtrain.target_spacing", Value: strings.Trim(fmt.Sprint(s), "[]")})
		if u := cfg.Data.TargetUnit(); u != "" {
			meta = append(meta, onnx.Property{Key: "voxtrain.spacing_unit", Value: u})
		}
	}
	model, err := onnx.ExportUNet(cfg.Model, params, onnx.UNetOptions{ProducerVersion: opts.Version, Metadata: meta})
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", opts.Checkpoint, err)
	}
	b := model.Marshal()
	if err := atomicfile.WriteFile(opts.ONNX, b, 0o644); err != nil {
		return fmt.Errorf("--onnx %s: %w", opts.ONNX, err)
	}
	weights := 0
	for _, t := range model.Graph.Initializers {
		weights += len(t.Raw) / 4
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s (%d bytes: opset %d, %d weights; input (N, %d, D, H, W), logits (N, %d, D, H, W))\n",
		opts.ONNX, len(b), onnx.Opset, weights, cfg.Model.InChannels, cfg.Model.NumClasses)
	return nil
}
