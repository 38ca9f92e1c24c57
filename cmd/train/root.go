package main

import (
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); otherwise
// it is derived from the build's VCS information.
var version = ""

// buildVersion returns the version string printed by --version and stored in
// checkpoints.
func buildVersion() string {
	if version != "" {
		return version
	}
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			v += "+" + rev + dirty
		}
	}
	return v
}

// newRootCmd builds the whole command tree. Each subcommand lives in its own
// file as new<Name>Cmd.
func newRootCmd() *cobra.Command {
	var tf trainFlags
	root := &cobra.Command{
		Use:   "train --config C [flags] | train COMMAND",
		Short: "Train 3D U-Nets on NIfTI volumes, with a data pipeline that never lets the GPU wait",
		Long: `train is voxtrain's single binary: it reads NIfTI volumes (.nii, .nii.gz,
.hdr/.img), prepares and augments patches with persistent goroutine workers,
and trains 3D U-Nets on the CPU or on CUDA GPUs.`,
		Example: `  # The bundled demo: train, validate, plot
  train demo

  # Train; flags override the YAML; Ctrl-C saves and prints the resume command
  train --config configs/nnunet_3d_fullres.yaml --fold 2 --run-id 1 --device cuda
  train --config configs/nnunet_3d_fullres.yaml --fold 2 --run-id 1 --resume auto

  # Describe NIfTI files like nib-ls / fslhd, or as JSON
  train info testdata/demo/imagesTr/hippocampus_001.nii.gz
  train info --json scan.nii.gz

  # Shell completion
  source <(train completion bash)`,
		Version:       buildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tf.config == "" {
				return cmd.Help()
			}
			_, _, err := runTraining(cmd, &tf)
			return err
		},
	}
	addTrainFlags(root, &tf)
	root.AddCommand(newInfoCmd(), newPrepareCmd(), newBenchDataCmd(), newBenchStepCmd(),
		newDemoCmd(), newValidateCmd(), newPredictCmd(), newPlotCmd())
	return root
}
