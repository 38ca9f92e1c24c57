package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
)

// PrepareOptions are `train prepare`'s.
type PrepareOptions struct {
	IO *IOStreams
	// Config is the loaded --config.
	Config *config.Config
	// Workers decode cases in parallel (0: the data workers).
	Workers int
	// Quiet prints only the summary.
	Quiet bool
}

// NewCmdPrepare builds `train prepare`; runF (nil: prepareRun) receives
// the options.
func NewCmdPrepare(f *Factory, runF func(context.Context, *PrepareOptions) error) *cobra.Command {
	opts := &PrepareOptions{IO: f.IO}
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "prepare --config C",
		Short: "Write the prepared store: every case decoded once, preprocessed, chunked and compressed",
		Long: `prepare decodes every case of the config's dataset once, applies the
deterministic preprocessing (channel stacking, normalisation, and
resampling to data.target_spacing when set: images trilinear, labels
nearest neighbour, shape round(shape × spacing / target)), cuts each
volume into cubic chunks (data.store_chunk, default 64) and compresses each
chunk on its own (data.store_codec: s2-shuffle, the default — S2 over the
float32 byte planes, fastest to read — or s2, zstd, zstd-shuffle), with an
index. Training then reads a patch by decompressing only the chunks it
overlaps, instead of inflating whole .nii.gz files.

The store lives in data.store (default <dataset>/.voxtrain-store). Running
prepare again rebuilds only the cases whose source files changed (size and
mtime, confirmed by content hash) and everything when the preprocessing
changed (normalisation, its ct statistics, target_spacing); training does
the same before it starts.

With normalization: [ct] and no ct_window/ct_std in the config, the ct
statistics are computed first, as nnU-Net's dataset fingerprint: 10,000
foreground voxels drawn per labelled case of the whole dataset (fixed
seed), their 0.5/99.5 percentiles as the window, their mean and std. They
are cached in <store>/ct_statistics.json and printed.`,
		Example: `  train prepare --config configs/demo.yaml
  train prepare -c configs/demo.yaml --workers 2 -q`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Workers < 0 {
				return fmt.Errorf("--workers: %d, want ≥ 0 (0: the data workers)", opts.Workers)
			}
			var err error
			if opts.Config, err = config.Load(cfgPath); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return prepareRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "run config (YAML with a data: section)")
	cmd.Flags().IntVar(&opts.Workers, "workers", 0, "cases decoded in parallel (default: the data workers)")
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "print only the summary")
	cmd.MarkFlagRequired("config")
	return cmd
}

// prepareRun writes the store and prints its summary.
func prepareRun(ctx context.Context, opts *PrepareOptions) error {
	lvl := slog.LevelInfo
	if opts.Quiet {
		lvl = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: lvl}))
	rep, err := data.Prepare(ctx, opts.Config.Data, data.PrepareOptions{Workers: opts.Workers, Logger: log})
	if err != nil {
		return err
	}
	out := opts.IO.Out
	ratio := 0.0
	if rep.StoredBytes > 0 {
		ratio = float64(rep.RawBytes) / float64(rep.StoredBytes)
	}
	if rep.CT != nil {
		fmt.Fprintf(out, "ct statistics (channel %d) from %d cases: window [%.6g, %.6g], mean %.6g, std %.6g\n",
			rep.CT.Channel, rep.CT.Cases, rep.CT.Stats.Lower, rep.CT.Stats.Upper, rep.CT.Stats.Mean, rep.CT.Stats.Std)
	}
	if t := rep.TargetSpacing; t != nil {
		ax := make([]string, 3)
		for a, s := range t {
			ax[a] = fmt.Sprint(s)
			if s == 0 {
				ax[a] = "each case's own"
			}
		}
		fmt.Fprintf(out, "resampled to spacing %s (D × H × W)\n", strings.Join(ax, " × "))
	}
	fmt.Fprintf(out, "store %s: %d cases (%d written, %d current), %.1f MiB raw → %.1f MiB stored (%.2fx, %s, %d³ chunks) in %.1fs\n",
		rep.Dir, rep.Cases, rep.Written, rep.Current, float64(rep.RawBytes)/(1<<20), float64(rep.StoredBytes)/(1<<20),
		ratio, rep.Codec, rep.Chunk, rep.Elapsed.Seconds())
	return nil
}
