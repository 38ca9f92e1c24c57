package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/infer"
)

// PredictOptions are `train predict`'s.
type PredictOptions struct {
	IO         *IOStreams
	OpenDevice func(spec string, threads int) (*ComputeDevice, error)

	Model modelFlags
	// Inputs are the image files, one per channel in channel order (or
	// one 4D file); Output the label file written.
	Inputs []string
	Output string
}

// NewCmdPredict builds `train predict`; runF (nil: predictRun) receives
// the options.
func NewCmdPredict(f *Factory, runF func(context.Context, *PredictOptions) error) *cobra.Command {
	opts := &PredictOptions{IO: f.IO, OpenDevice: f.OpenDevice}
	cmd := &cobra.Command{
		Use:   "predict --checkpoint C --input in.nii.gz --output out.nii.gz",
		Short: "Segment one image by sliding window and write the label map with the input's header",
		Long: `predict segments an image (one --input per channel, or one 4D file) with a
trained checkpoint, applying the same preprocessing as training, and writes
the labels as uint8 NIfTI on the input's grid: same dimensions, voxel sizes,
qform and sform, so ITK-SNAP, 3D Slicer and FSLeyes overlay it on the input.`,
		Example: `  train predict --checkpoint runs/demo/fold_0/run_0/checkpoints/best \
      --input testdata/demo/imagesTr/hippocampus_001.nii.gz --output hippocampus_001_pred.nii.gz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(opts.Inputs) == 0 || opts.Output == "" {
				return usageErr(cmd, fmt.Errorf("--input and --output are required"))
			}
			if err := opts.Model.check(cmd.Flags()); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return predictRun(cmd.Context(), opts)
		},
	}
	opts.Model.register(cmd)
	cmd.Flags().StringArrayVar(&opts.Inputs, "input", nil, "input image (repeat for several channels, in channel order)")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "output label file (.nii or .nii.gz)")
	return cmd
}

// predictRun segments the input and writes the labels. The output is
// checked before the checkpoint is loaded, so a bad --output fails at
// once rather than after the model is built and the image segmented.
func predictRun(ctx context.Context, opts *PredictOptions) error {
	if err := infer.CheckOutput(opts.Output, opts.Inputs); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	m, done, err := opts.Model.load(opts.OpenDevice)
	if err != nil {
		return err
	}
	defer done()
	if err := m.PredictFile(ctx, opts.Inputs, opts.Output, opts.Model.Window); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s\n", opts.Output)
	return nil
}
