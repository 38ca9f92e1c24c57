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

// NewCmdRoot builds the whole command tree: the root command trains (see
// NewCmdTrain); each subcommand lives in its own file.
func NewCmdRoot(f *Factory) *cobra.Command {
	root := NewCmdTrain(f, nil)
	root.AddCommand(NewCmdDemo(f, nil), NewCmdValidate(f, nil), NewCmdPredict(f, nil), NewCmdPlot(f, nil),
		NewCmdInfo(f, nil), NewCmdPrepare(f, nil), NewCmdBenchData(f, nil), NewCmdBenchStep(f, nil), NewCmdExport(f, nil),
		NewCmdEvaluate(f, nil), NewCmdEnsemble(f, nil), NewCmdFindBest(f, nil), NewCmdExportModel(f, nil), NewCmdInstallModel(f, nil), NewCmdImportNNUNet(f, nil), NewCmdPostprocess(f), NewCmdPlan(f, nil), NewCmdLaunch(f, nil), NewCmdSweep(f, nil))
	root.SuggestionsMinimumDistance = 2 // cobra's default, which SuggestionsFor alone does not apply
	withUsageHints(root)
	return root
}
