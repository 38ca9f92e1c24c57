package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"

	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

// volumeInfo is `train info --json` for a file of another format than
// NIfTI (NRRD, MetaImage, TIFF, ...): the keys of nifti.Info that apply,
// in the same conventions — shape as nibabel orders it (x, y, z, then
// channels), pixdim's spatial sizes as spacing (x, y, z), their unit, the
// RAS+ affine — and the format's name.
type volumeInfo struct {
	File    string         `json:"file"`
	Format  string         `json:"format"`
	Shape   []int          `json:"shape"`
	Spacing [3]nifti.Float `json:"spacing"`
	// Unit is Spacing's and Affine's (volume.Header.Unit: "nanometer",
	// …; "" when the file does not say), under the key NIfTI's has.
	Unit   string            `json:"unit"`
	Affine [4][4]nifti.Float `json:"affine"`
	// SHA256 and Stats describe the voxels; absent (and NotRead says
	// why) for a volume too large to read whole (volume.CheckInMemory),
	// whose header is still described.
	SHA256  string           `json:"float32_sha256,omitempty"`
	Stats   *nifti.StatsJSON `json:"stats"`
	NotRead string           `json:"data_not_read,omitempty"`
	// Levels lists a multiscale image group's levels, finest first
	// (zarr.ImageLevels: an OME-Zarr image, a COSEM N5 group as
	// OpenOrganelle publishes); absent for a file or an array. The keys
	// above describe level 0, which is what the group opens as.
	Levels   []levelInfo `json:"levels,omitempty"`
	channels int
}

// levelInfo is one level of a multiscale group in `train info`: its
// array's path in the group, and its shape, spacing and origin (of
// voxel 0) in x, y, z order as the other keys, in unit.
type levelInfo struct {
	Path    string         `json:"path"`
	Shape   [3]int         `json:"shape"`
	Spacing [3]nifti.Float `json:"spacing"`
	Origin  [3]nifti.Float `json:"origin"`
	Unit    string         `json:"unit"`
}

// inspectVolume reads a whole volume file through package volume and
// describes it. The checksum is of the float32 voxels, little-endian, in
// (channel, D, H, W) order, as the formats' conformance fixtures record.
// A volume too large to read whole (an OpenOrganelle s0 of 10^11 voxels,
// which a dataset manifest or train predict -o OUT.zarr reads by region)
// is described by its header and levels only.
func inspectVolume(path string) (*volumeInfo, error) {
	f, err := volume.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := f.Header()
	if err := volume.CheckShape(h.Shape); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	info := &volumeInfo{File: path, Format: volume.FormatName(path), channels: h.Channels,
		Shape:   []int{h.Shape[2], h.Shape[1], h.Shape[0]},
		Spacing: [3]nifti.Float{nifti.Float(h.Spacing[2]), nifti.Float(h.Spacing[1]), nifti.Float(h.Spacing[0])},
		Unit:    h.Unit}
	if h.Channels > 1 {
		info.Shape = append(info.Shape, h.Channels)
	}
	for i := range h.Affine {
		for j := range h.Affine[i] {
			info.Affine[i][j] = nifti.Float(h.Affine[i][j])
		}
	}
	if info.Format == "zarr" {
		ls, err := zarr.ImageLevels(path)
		if err != nil {
			return nil, err
		}
		for _, l := range ls {
			info.Levels = append(info.Levels, levelInfo{Path: l.Path, Unit: l.Unit,
				Shape:   [3]int{l.Shape[2], l.Shape[1], l.Shape[0]},
				Spacing: [3]nifti.Float{nifti.Float(l.Spacing[2]), nifti.Float(l.Spacing[1]), nifti.Float(l.Spacing[0])},
				Origin:  [3]nifti.Float{nifti.Float(l.Origin[2]), nifti.Float(l.Origin[1]), nifti.Float(l.Origin[0])}})
		}
	}
	if err := volume.CheckInMemory(h.Shape, h.Channels); err != nil {
		info.NotRead = err.Error()
		return info, nil
	}
	n := h.Shape[0] * h.Shape[1] * h.Shape[2]
	dst := make([][]float32, h.Channels)
	for c := range dst {
		dst[c] = make([]float32, n)
	}
	if err := f.ReadRegion(volume.Whole(h.Shape), dst); err != nil {
		return nil, err
	}
	sum := sha256.New()
	buf := make([]byte, 4*n)
	lo, hi, total := math.Inf(1), math.Inf(-1), 0.0
	for _, ch := range dst {
		for i, v := range ch {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
			x := float64(v)
			lo, hi, total = math.Min(lo, x), math.Max(hi, x), total+x
		}
		sum.Write(buf)
	}
	info.SHA256 = hex.EncodeToString(sum.Sum(nil))
	info.Stats = &nifti.StatsJSON{Min: nifti.Float(lo), Max: nifti.Float(hi), Mean: nifti.Float(total / float64(n*h.Channels)), Sum: nifti.Float(total)}
	return info, nil
}

func printVolumeInfo(w io.Writer, info *volumeInfo) {
	fmt.Fprintln(w, info.File)
	row := func(k, f string, a ...any) { fmt.Fprintf(w, "  %-16s"+f+"\n", append([]any{k}, a...)...) }
	row("format", "%s", info.Format)
	row("shape", "%v (x, y, z%s)", info.Shape, map[bool]string{true: ", channels", false: ""}[info.channels > 1])
	row("voxel size", "%.6g × %.6g × %.6g %s", float64(info.Spacing[0]), float64(info.Spacing[1]), float64(info.Spacing[2]), unitText(info.Unit))
	printMatrix(w, "affine (RAS+)", info.Affine)
	var a nifti.Matrix4
	for i := range a {
		for j := range a[i] {
			a[i][j] = float64(info.Affine[i][j])
		}
	}
	row("orientation", "%s", nifti.Orientation(a))
	if info.Stats != nil {
		row("data", "min %s  max %s  mean %s", fmtF(info.Stats.Min), fmtF(info.Stats.Max), fmtF(info.Stats.Mean))
		row("float32_sha256", "%s", info.SHA256)
	} else {
		row("data", "not read: %s", info.NotRead)
	}
	for i, l := range info.Levels {
		row(map[bool]string{true: "levels", false: ""}[i == 0], "%-6s %-12s %.6g × %.6g × %.6g %s  origin (%.6g, %.6g, %.6g)",
			l.Path, fmt.Sprint(l.Shape), float64(l.Spacing[0]), float64(l.Spacing[1]), float64(l.Spacing[2]), unitText(l.Unit),
			float64(l.Origin[0]), float64(l.Origin[1]), float64(l.Origin[2]))
	}
}

// unitText is a header's unit in the table: "(unit not stated)" for "".
func unitText(u string) string {
	if u == "" {
		return "(unit not stated)"
	}
	return u
}
