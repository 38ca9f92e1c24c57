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
	root := &cobra.Command{
		Use:   "train",
		Short: "Train 3D U-Nets on NIfTI volumes, with a data pipeline that never lets the GPU wait",
		Long: `train is voxtrain's single binary: it reads NIfTI volumes (.nii, .nii.gz,
.hdr/.img), prepares and augments patches with persistent goroutine workers,
and trains 3D U-Nets on the CPU or on CUDA GPUs.`,
		Example: `  # Describe NIfTI files like nib-ls / fslhd, or as JSON
  train info testdata/demo/imagesTr/hippocampus_001.nii.gz
  train info --json scan.nii.gz

  # Shell completion
  source <(train completion bash)`,
		Version:       buildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newInfoCmd(), newPrepareCmd(), newBenchDataCmd())
	return root
}
