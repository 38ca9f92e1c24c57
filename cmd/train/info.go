package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/volume"
)

// InfoOptions are `train info`'s.
type InfoOptions struct {
	IO    *IOStreams
	Files []string
	// JSON prints one JSON object per file.
	JSON bool
	// MaxGzipBytes refuses gzipped files whose header describes more
	// decompressed bytes.
	MaxGzipBytes int64
}

// NewCmdInfo builds `train info`; runF (nil: infoRun) receives the options.
func NewCmdInfo(f *Factory, runF func(context.Context, *InfoOptions) error) *cobra.Command {
	opts := &InfoOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "info FILE...",
		Short: "Describe volume files: NIfTI headers, affines, orientation and data statistics (NRRD, MetaImage, TIFF, Zarr too)",
		Long: `info prints each file's header the way nibabel's nib-ls and FSL's fslhd do:
dimensions, voxel sizes and units, datatype, scaling, qform/sform codes and
matrices, the affine nibabel would use, orientation codes, header extensions
and min/max/mean of the scaled data.

With --json it prints one JSON object per line and file, with the keys file,
nifti_version, dim, pixdim, qfac_stored, datatype, bitpix, vox_offset,
scl_slope, scl_inter, qform_code, sform_code, qform, sform, affine, shape, unit,
raw_sha256 and stats {min, max, mean, sum}. unit is the spatial unit of
pixdim and the affines as UDUNITS-2 and OME-NGFF spell it ("millimeter",
"micrometer", "meter"; "" when xyzt_units says none); other formats
(NRRD, MetaImage, TIFF, Zarr, N5) print file, format, shape, spacing,
unit, affine, float32_sha256 and stats, unit under the same key, and for
a multiscale group (OME-Zarr, COSEM N5) levels, each level's path, shape,
spacing, origin and unit. A volume too large to read whole prints
data_not_read (why), stats null and no float32_sha256. pixdim is as nibabel reads it
(pixdim[0], the qfac, is ±1: a stored 0 reads as 1); qfac_stored is
pixdim[0] as the file stores it. Non-finite numbers are null; qform is null
when the quaternion is invalid; stats is null for complex data.`,
		Example: `  train info testdata/demo/imagesTr/hippocampus_001.nii.gz
  train info --json testdata/demo/imagesTr/*.nii.gz | jq .shape`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Files = args
			if opts.MaxGzipBytes <= 0 {
				return fmt.Errorf("--max-gzip-bytes: %d, want > 0", opts.MaxGzipBytes)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return infoRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object per file")
	cmd.Flags().Int64Var(&opts.MaxGzipBytes, "max-gzip-bytes", nifti.DefaultMaxGzipBytes, "refuse gzipped files whose header describes more decompressed bytes than this")
	return cmd
}

// infoRun describes every file; a file that cannot be read is reported
// and the others still described.
func infoRun(opts *InfoOptions) error {
	r := nifti.Reader{MaxGzipBytes: opts.MaxGzipBytes}
	out := opts.IO.Out
	failed := 0
	// emit prints one file's description: a JSON line with --json, else
	// the table print writes.
	emit := func(v any, print func()) error {
		if !opts.JSON {
			print()
			return nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		fmt.Fprintln(out, string(b))
		return nil
	}
	for _, path := range opts.Files {
		// Other formats (NRRD, MetaImage, TIFF, ...) through package
		// volume: the keys that apply.
		if name := volume.FormatName(path); name != "" && name != "nifti" {
			info, err := inspectVolume(path)
			if err != nil {
				fmt.Fprintln(opts.IO.ErrOut, "train info:", err)
				failed++
				continue
			}
			if err := emit(info, func() { printVolumeInfo(out, info) }); err != nil {
				return err
			}
			continue
		}
		// A folder is a likely slip (`train info imagesTr`): say so, and
		// how to describe what is in it.
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			fmt.Fprintf(opts.IO.ErrOut, "train info: %s is a directory, not a NIfTI file (to describe the files in it: train info %s)\n",
				path, filepath.Join(path, "*.nii.gz"))
			failed++
			continue
		}
		info, hdr, err := r.Inspect(path)
		if err != nil {
			fmt.Fprintln(opts.IO.ErrOut, "train info:", err)
			failed++
			continue
		}
		if err := emit(info, func() { printInfo(out, info, hdr) }); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d files could not be read", failed, len(opts.Files))
	}
	return nil
}

var xformNames = map[int32]string{0: "unknown", 1: "scanner", 2: "aligned", 3: "talairach", 4: "mni_152", 5: "template"}

func printInfo(w io.Writer, info *nifti.Info, h *nifti.Header) {
	order := "little-endian"
	if h.ByteOrder == binary.BigEndian {
		order = "big-endian"
	}
	fmt.Fprintf(w, "%s\n", info.File)
	row := func(k, format string, a ...any) { fmt.Fprintf(w, "  %-16s"+format+"\n", append([]any{k}, a...)...) }
	row("nifti_version", "%d (%s)", info.NiftiVersion, order)
	row("dim", "%v", info.Dim)
	shape := make([]string, len(info.Shape))
	for i, s := range info.Shape {
		shape[i] = fmt.Sprint(s)
	}
	row("shape", "%s", strings.Join(shape, " × "))
	row("pixdim", "%v", fmtFloats(info.Pixdim[:]))
	if float64(info.QfacStored) != float64(info.Pixdim[0]) {
		row("qfac", "pixdim[0] is %g in the file, applied as %g (the standard's and nibabel's reading)", float64(info.QfacStored), float64(info.Pixdim[0]))
	}
	row("voxel size", "%.6g × %.6g × %.6g %s (time unit %s)", h.Pixdim[1], h.Pixdim[2], h.Pixdim[3], h.SpaceUnits(), h.TimeUnits())
	row("datatype", "%v (%d), bitpix %d", h.Datatype, info.Datatype, info.Bitpix)
	row("vox_offset", "%d", info.VoxOffset)
	if slope, inter, err := h.Scaling(); err != nil {
		row("scaling", "invalid: %v", err)
	} else if slope == 1 && inter == 0 {
		row("scaling", "none (scl_slope %v, scl_inter %v)", fmtF(info.SclSlope), fmtF(info.SclInter))
	} else {
		row("scaling", "value = stored × %g + %g", slope, inter)
	}
	if h.Descrip != "" {
		row("descrip", "%q", h.Descrip)
	}
	row("cal_min/max", "%g / %g", h.CalMin, h.CalMax)
	row("qform_code", "%d (%s)", info.QformCode, xformNames[info.QformCode])
	if info.Qform != nil {
		printMatrix(w, "qform", *info.Qform)
	} else {
		row("qform", "invalid quaternion")
	}
	row("sform_code", "%d (%s)", info.SformCode, xformNames[info.SformCode])
	printMatrix(w, "sform", info.Sform)
	src := "pixdim fallback"
	if info.SformCode > 0 {
		src = "sform"
	} else if info.QformCode > 0 {
		src = "qform"
	}
	if info.Affine != nil {
		printMatrix(w, "affine ("+src+")", *info.Affine)
	}
	if a, err := h.Affine(); err == nil {
		row("orientation", "%s", nifti.Orientation(a))
	}
	if len(h.Extensions) > 0 {
		codes := make([]string, len(h.Extensions))
		for i, e := range h.Extensions {
			codes[i] = fmt.Sprintf("%d (%d bytes)", e.Code, len(e.Data)+8)
		}
		row("extensions", "%s", strings.Join(codes, ", "))
	}
	if info.Stats != nil {
		row("data", "min %s  max %s  mean %s", fmtF(info.Stats.Min), fmtF(info.Stats.Max), fmtF(info.Stats.Mean))
	}
	row("raw_sha256", "%s", info.RawSHA256)
}

func fmtF(f nifti.Float) string {
	v := float64(f)
	if math.IsNaN(v) {
		return "nan"
	}
	return fmt.Sprintf("%.6g", v)
}

func fmtFloats(fs []nifti.Float) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = fmtF(f)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func printMatrix(w io.Writer, name string, m [4][4]nifti.Float) {
	for i := 0; i < 4; i++ {
		label := ""
		if i == 0 {
			label = name
		}
		fmt.Fprintf(w, "  %-16s[% 11.5f % 11.5f % 11.5f % 11.5f]\n", label, float64(m[i][0]), float64(m[i][1]), float64(m[i][2]), float64(m[i][3]))
	}
}
