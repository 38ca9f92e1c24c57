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
deterministic preprocessing (channel stacking, normalisation), cuts each
volume into cubic chunks (data.store_chunk, default 64) and compresses each
chunk on its own (data.store_codec: s2-shuffle, the default — S2 over the
float32 byte planes, fastest to read — or s2, zstd, zstd-shuffle), with an
index. Training then reads a patch by decompressing only the chunks it
overlaps, instead of inflating whole .nii.gz files.

The store lives in data.store (default <dataset>/.voxtrain-store). Running
prepare again rebuilds only the cases whose source files changed (size and
mtime, confirmed by content hash) and everything when the preprocessing
changed; training does the same check when it opens the store.`,
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
