package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/data/databench"
)

func newPrepareCmd() *cobra.Command {
	var (
		cfgPath string
		workers int
		quiet   bool
	)
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
the same check when it opens the store.

With normalization: [ct] and no ct_window/ct_std in the config, the ct
statistics are computed first, as nnU-Net's dataset fingerprint: 10,000
foreground voxels drawn per labelled case of the whole dataset (fixed
seed), their 0.5/99.5 percentiles as the window, their mean and std. They
are cached in <store>/ct_statistics.json and printed.`,
		Example: `  train prepare --config configs/hippocampus.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := databench.LoadFile(cfgPath)
			if err != nil {
				return err
			}
			lvl := slog.LevelInfo
			if quiet {
				lvl = slog.LevelWarn
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}))
			rep, err := data.Prepare(cmd.Context(), f.Data, data.PrepareOptions{Workers: workers, Logger: log})
			if err != nil {
				return err
			}
			ratio := 0.0
			if rep.StoredBytes > 0 {
				ratio = float64(rep.RawBytes) / float64(rep.StoredBytes)
			}
			if rep.CT != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "ct statistics (channel %d) from %d cases: window [%.6g, %.6g], mean %.6g, std %.6g\n",
					rep.CT.Channel, rep.CT.Cases, rep.CT.Stats.Lower, rep.CT.Stats.Upper, rep.CT.Stats.Mean, rep.CT.Stats.Std)
			}
			if t := rep.TargetSpacing; t != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "resampled to spacing %g × %g × %g (D × H × W)\n", t[0], t[1], t[2])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "store %s: %d cases (%d written, %d current), %.1f MiB raw → %.1f MiB stored (%.2fx, %s, %d³ chunks) in %.1fs\n",
				rep.Dir, rep.Cases, rep.Written, rep.Current, float64(rep.RawBytes)/(1<<20), float64(rep.StoredBytes)/(1<<20),
				ratio, rep.Codec, rep.Chunk, rep.Elapsed.Seconds())
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "config file (YAML with a data: section)")
	cmd.Flags().IntVar(&workers, "workers", 0, "cases decoded in parallel (default: the data workers)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the summary")
	cmd.MarkFlagRequired("config")
	return cmd
}
