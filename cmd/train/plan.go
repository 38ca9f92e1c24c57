package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/plan"
)

// PlanOptions are `train plan`'s.
type PlanOptions struct {
	IO *IOStreams
	// Dataset is the dataset folder (MSD or nnU-Net layout).
	Dataset string
	// Output is the folder the fingerprint, plans and YAMLs go to.
	Output string
	// Workers decode cases in parallel (each holds one case in memory).
	Workers int
	// VRAMGB is the GPU memory the configurations are sized for (0: the
	// planner's default).
	VRAMGB float64
	// Planner is the planner preset (plan.PresetNamed: default,
	// resenc-m, resenc-l, resenc-xl or nnU-Net's class name).
	Planner string
	// TargetSpacing replaces the planned full resolution spacing
	// (D, H, W; nil: the median rule), nnU-Net's -overwrite_target_spacing.
	TargetSpacing []float64
	// Fingerprint is a dataset_fingerprint.json to plan from instead of
	// reading every case ("": extract one), as nnUNetv2_plan_experiment
	// reuses the fingerprint nnUNetv2_extract_fingerprint wrote.
	Fingerprint string
}

// NewCmdPlan builds `train plan`; runF (nil: planRun) receives the
// options.
func NewCmdPlan(f *Factory, runF func(context.Context, *PlanOptions) error) *cobra.Command {
	opts := &PlanOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "plan DATASET -o OUTDIR",
		Short: "Plan training configurations for a dataset as nnU-Net v2 does (fingerprint, 3d_fullres, 2d, 3d_lowres)",
		Long: `plan reads every case of a dataset (MSD dataset.json, or nnU-Net's
imagesTr/labelsTr layout) and writes into OUTDIR, never into the dataset:

  dataset_fingerprint.json  nnU-Net v2's fingerprint: spacings, shapes after
                            cropping to the nonzero region, foreground
                            intensity statistics per channel, median relative
                            size after cropping; plus case_ids,
                            class_frequencies and spacing_unit (the unit
                            the cases state, written into the run configs
                            as data.spacing_unit)
  plans.json                the plans in nnUNetPlans.json's layout (axes
                            transposed as nnU-Net's, coarsest first)
  3d_fullres.yaml, 2d.yaml  run configs for train --config, each derived value
  3d_lowres.yaml            with a comment; 3d_lowres only for large images

The rules are nnU-Net v2's ExperimentPlanner's: median target spacing (the
10th percentile on a very anisotropic axis), the patch from the spacing's
aspect ratio clipped to the median image, pooling and kernels from the
spacing, 32 features doubling to 320 (512 in 2-D), the patch shrunk until
the feature-map estimate fits the GPU memory, batch size from what is left,
at most 5 % of the dataset's voxels per batch. See docs/PLANNING.md.

--planner resenc-m, resenc-l or resenc-xl plans nnU-Net's residual-encoder
presets instead (nnUNetPlannerResEncM/L/XL, the nnUNetResEncUNet*Plans
nnU-Net recommends since 2024): a ResidualEncoderUNet (model.encoder:
residual, 1, 3, 4, 6, 6, ... residual blocks per stage, one decoder conv
per stage) sized for 8, 24 or 40 GB of GPU memory, no 5 % cap.

--target-spacing D,H,W (or one value for all three axes) sets the full
resolution spacing instead of the median rule, as nnU-Net's
-overwrite_target_spacing: in the cases' unit and the files' axis order
(those of dataset_fingerprint.json's spacings). Everything planned from it
follows: the transpose, 3d_fullres, 3d_lowres (which coarsens it) and 2d's
in-plane spacing. Plan into another -o folder than the default plans'.

--fingerprint FILE plans from a dataset_fingerprint.json instead of reading
every case (the one an earlier train plan wrote, or nnU-Net's own), as
nnUNetv2_plan_experiment reuses nnUNetv2_extract_fingerprint's: re-planning
a large dataset for another GPU or spacing takes seconds. It must describe
DATASET: as many cases (the same IDs in order, when it names them) and
channels.`,
		Example: `  train plan testdata/demo -o plans/demo
  train plan testdata/demo -o plans/demo_resenc_l --planner resenc-l
  train plan testdata/demo -o plans/demo_2mm_slices --target-spacing 2,1,1 --fingerprint plan/testdata/nnunet_dataset_fingerprint.json
  # then, to train what was planned: train --config plans/demo/3d_fullres.yaml --fold 0`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dataset = args[0]
			switch {
			case opts.Output == "":
				return usageErr(cmd, errors.New("-o/--output is required (the folder to write the plans to)"))
			case opts.Workers < 1:
				return usageErr(cmd, fmt.Errorf("--workers: %d, want >= 1", opts.Workers))
			case cmd.Flags().Changed("gpu-memory") && !(opts.VRAMGB > 0):
				return usageErr(cmd, fmt.Errorf("--gpu-memory: %v GB, want > 0", opts.VRAMGB))
			}
			if _, err := plan.PresetNamed(opts.Planner); err != nil {
				return usageErr(cmd, fmt.Errorf("--planner: %w", err))
			}
			if cmd.Flags().Changed("target-spacing") {
				sp, err := targetSpacing(opts.TargetSpacing)
				if err != nil {
					return usageErr(cmd, fmt.Errorf("--target-spacing: %w", err))
				}
				opts.TargetSpacing = sp
			}
			if inside(opts.Output, opts.Dataset) {
				return usageErr(cmd, fmt.Errorf("-o %s: inside the dataset folder %s; plans go elsewhere (the dataset may be read-only or shared)", opts.Output, opts.Dataset))
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return planRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "folder to write the fingerprint, plans.json and the YAMLs to (created)")
	cmd.Flags().IntVar(&opts.Workers, "workers", runtime.GOMAXPROCS(0), "cases decoded in parallel (each holds one case in memory)")
	cmd.Flags().Float64Var(&opts.VRAMGB, "gpu-memory", 0, "GPU memory in GB to size patch and batch for (nnU-Net's gpu_memory_target_in_gb; default: the planner's, 8 GB, and 24 and 40 for resenc-l and resenc-xl)")
	cmd.Flags().StringVar(&opts.Planner, "planner", "default", "nnU-Net's planner: default (ExperimentPlanner), resenc-m, resenc-l or resenc-xl (the residual-encoder presets, nnUNetPlannerResEncM/L/XL)")
	cmd.Flags().StringVar(&opts.Fingerprint, "fingerprint", "", "plan from this dataset_fingerprint.json (train plan's or nnU-Net's) instead of reading every case")
	cmd.Flags().Float64SliceVar(&opts.TargetSpacing, "target-spacing", nil, "full resolution spacing D,H,W (or one value) instead of the cases' median, as nnU-Net's -overwrite_target_spacing")
	return cmd
}

// readFingerprint reads --fingerprint and checks it describes ds.
func readFingerprint(path string, ds *data.Dataset) (*plan.Fingerprint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--fingerprint: %w", err)
	}
	defer f.Close()
	fp, err := plan.ReadFingerprint(f)
	if err == nil {
		err = fp.CheckAgainst(ds)
	}
	if err != nil {
		return nil, fmt.Errorf("--fingerprint %s: %w", path, err)
	}
	return fp, nil
}

// targetSpacing checks --target-spacing before any case is read: three
// spacings, or one for all three axes, as plan.CheckTargetSpacing wants
// them.
func targetSpacing(v []float64) ([]float64, error) {
	switch len(v) {
	case 1:
		v = []float64{v[0], v[0], v[0]}
	case 3:
	default:
		return nil, fmt.Errorf("%d values, want D,H,W (three) or one for all axes", len(v))
	}
	return v, plan.CheckTargetSpacing(v)
}

// inside reports whether path is dir or lies under it.
func inside(path, dir string) bool {
	p, err1 := filepath.Abs(path)
	d, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	r, err := filepath.Rel(d, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
}

// planRun extracts the fingerprint, plans and writes the outputs.
func planRun(ctx context.Context, opts *PlanOptions) error {
	// The output folder is checked before the cases are read.
	if st, err := os.Stat(opts.Output); err == nil && !st.IsDir() {
		return fmt.Errorf("-o %s: a file, not a folder to write the plans into", opts.Output)
	}
	// A dataset of nnU-Net regions opens as the multi-label dataset it
	// trains as (its configs say so, plan.YAML).
	cfg := config.Data{Dataset: opts.Dataset}
	if dj := filepath.Join(opts.Dataset, "dataset.json"); isFile(dj) {
		ev, err := evaluation.ReadDataset(dj)
		if err != nil {
			return err
		}
		cfg.MultiLabel = len(ev.Regions) > 0
	}
	ds, err := data.OpenDataset(cfg)
	if err != nil {
		return err
	}
	var fp *plan.Fingerprint
	if opts.Fingerprint != "" {
		if fp, err = readFingerprint(opts.Fingerprint, ds); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.ErrOut, "plan: the fingerprint of %d cases in %s\n", len(fp.Spacings), opts.Fingerprint)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "plan: fingerprinting %d cases of %s on %d workers\n", len(ds.Cases), opts.Dataset, opts.Workers)
		if fp, err = plan.Extract(ctx, ds, ds.Channels, opts.Workers); err != nil {
			return err
		}
	}
	d, err := plan.DescribeDataset(ds, fp, len(fp.ForegroundIntensityPropertiesPerChannel))
	if err != nil {
		return err
	}
	preset, err := plan.PresetNamed(opts.Planner)
	if err != nil {
		return err
	}
	p, err := plan.MakeOpts(fp, d, plan.Options{Preset: preset, VRAMGB: opts.VRAMGB, TargetSpacing: opts.TargetSpacing})
	if err != nil {
		return err
	}
	files, err := plan.Write(opts.Output, opts.Dataset, fp, p, d)
	if err != nil {
		return err
	}
	out := opts.IO.Out
	for _, name := range plan.YAMLConfigurations {
		c := p.Configurations[name]
		if c == nil {
			continue
		}
		fmt.Fprintf(out, "%-10s patch %v (transposed %v) batch %d, %d stages, features %v\n", name, c.PatchSize, p.TransposeForward, c.BatchSize,
			c.Architecture.ArchKwargs.NStages, c.Architecture.ArchKwargs.FeaturesPerStage)
	}
	for _, f := range files {
		fmt.Fprintln(out, "wrote", f)
	}
	return nil
}
