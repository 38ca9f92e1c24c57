package infer

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/volume"
)

// channelSuffix is nnU-Net's channel file name without its ending:
// CASE_XXXX, XXXX the channel from 0000.
var channelSuffix = regexp.MustCompile(`^(.+)_(\d{4})$`)

// imageExt returns name's image file ending among the registered
// formats' (volume.FileEnding: NIfTI's, a .img beside its .hdr being the
// same image and not listed, and those of the other formats nnU-Net
// datasets use, file_ending .nrrd, .mha, .tif, a .nhdr or .mhd header
// with its data file beside it); "" when it has none. Zarr and N5 stores
// are folders, predicted one at a time (-o OUT.ome.zarr).
func imageExt(name string) string { return volume.FileEnding(name) }

// imageEndings lists the endings for messages.
func imageEndings() string { return strings.Join(volume.Endings(), ", ") }

// FindCases lists the cases to predict from inputs, folders and image
// files, for a model taking channels input channels. A folder stands for
// the image files in it (hidden files and other names skipped); the files
// are then grouped into cases as nnU-Net's predictor does:
//
//   - the nnU-Net layout, CASE_0000.nii.gz, CASE_0001.nii.gz, …: files
//     sharing CASE are one case, ordered by channel; every case must have
//     exactly channels files, 0000 to channels−1;
//   - otherwise one file per case (an MSD imagesTs folder, or 4D files
//     holding every channel), the case named after the file.
//
// For a one-channel model it is file by file: CASE_0000 is case CASE
// (and a CASE_0001 beside it a channel too many), any other name a case
// of its own, so case_0001.nii.gz, case_0002.nii.gz, … without a
// case_0000 are cases, not channels. For a model of several channels
// either every file is named CASE_XXXX or none is (4D files). Two inputs
// of one case ID are an error. Cases are sorted by ID, and
// each case's Ext is the ending its first file has, for the output.
// Errors name the file or case and the problem.
func FindCases(inputs []string, channels int) ([]InputCase, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("no input")
	}
	if channels < 1 {
		return nil, fmt.Errorf("the model takes %d input channels", channels)
	}
	var files []string
	for _, in := range inputs {
		fi, err := os.Stat(in)
		if err != nil {
			return nil, fmt.Errorf("input %w", err)
		}
		if !fi.IsDir() {
			if imageExt(filepath.Base(in)) == "" {
				return nil, fmt.Errorf("input %s: not an image file name (want %s)", in, imageEndings())
			}
			files = append(files, in)
			continue
		}
		ents, err := os.ReadDir(in)
		if err != nil {
			return nil, fmt.Errorf("input %w", err)
		}
		n := len(files)
		for _, e := range ents {
			if name := e.Name(); !e.IsDir() && !strings.HasPrefix(name, ".") && imageExt(name) != "" {
				files = append(files, filepath.Join(in, name))
			}
		}
		if len(files) == n {
			return nil, fmt.Errorf("input %s: no image files (%s) in the folder", in, imageEndings())
		}
	}
	cases, err := groupChannels(files, channels)
	if err != nil {
		return nil, err
	}
	seen := map[string]string{}
	for _, c := range cases {
		if prev, ok := seen[c.ID]; ok {
			return nil, fmt.Errorf("inputs %s and %s are both case %s: the outputs would overwrite each other", prev, c.Images[0], c.ID)
		}
		seen[c.ID] = c.Images[0]
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].ID < cases[j].ID })
	return cases, nil
}

// InputCase is one case to predict: its image files in channel order and
// the file ending its outputs take.
type InputCase struct {
	data.Case
	// Ext is the ending the case's outputs take: its first file's
	// (outputExt), as nnU-Net writes its predictions with the dataset's
	// file ending.
	Ext string
}

// groupChannels groups files into cases (see FindCases).
func groupChannels(files []string, channels int) ([]InputCase, error) {
	type group struct {
		id    string
		files map[int]string
	}
	groups := map[string]*group{}
	var order []string
	keyOf := map[string]string{} // file → its group's key, for files named CASE_XXXX
	for _, f := range files {
		base := filepath.Base(f)
		m := channelSuffix.FindStringSubmatch(base[:len(base)-len(imageExt(base))])
		if m == nil {
			continue
		}
		key := filepath.Join(filepath.Dir(f), m[1])
		g := groups[key]
		if g == nil {
			g = &group{id: m[1], files: map[int]string{}}
			groups[key] = g
			order = append(order, key)
		}
		ch, _ := strconv.Atoi(m[2])
		if prev, ok := g.files[ch]; ok {
			return nil, fmt.Errorf("inputs %s and %s are both channel %04d of case %s", prev, f, ch, g.id)
		}
		g.files[ch] = f
		keyOf[f] = key
	}
	tooMany := func(g *group) error {
		extra := -1
		for ch := range g.files {
			if ch >= channels && (extra < 0 || ch < extra) {
				extra = ch
			}
		}
		return fmt.Errorf("case %s: %d channel files (%s is channel %04d), the model takes %d channels",
			g.id, len(g.files), g.files[extra], extra, channels)
	}
	single := func(f string) InputCase {
		base := filepath.Base(f)
		ext := imageExt(base)
		return InputCase{Case: data.Case{ID: strings.TrimSuffix(base, ext), Images: []string{f}, Weight: 1}, Ext: outputExt(ext)}
	}
	var cases []InputCase
	if channels == 1 {
		// File by file: CASE_0000 is case CASE, CASE_0001 beside it a
		// channel too many, any other name (case_0001 without a
		// case_0000) a case of its own.
		for _, f := range files {
			key, ok := keyOf[f]
			if ok {
				_, ok = groups[key].files[0]
			}
			if !ok {
				cases = append(cases, single(f))
				continue
			}
			g := groups[key]
			if len(g.files) > 1 {
				return nil, tooMany(g)
			}
			cases = append(cases, InputCase{Case: data.Case{ID: g.id, Images: []string{f}, Weight: 1}, Ext: outputExt(imageExt(f))})
		}
		return cases, nil
	}
	if len(groups) == 0 {
		// No file names a channel: 4D files holding every channel.
		for _, f := range files {
			cases = append(cases, single(f))
		}
		return cases, nil
	}
	for _, f := range files {
		if _, ok := keyOf[f]; !ok {
			return nil, fmt.Errorf("input %s: not named CASE_XXXX (XXXX the channel) like the other files, and the model takes %d channels", f, channels)
		}
	}
	for _, key := range order {
		g := groups[key]
		c := InputCase{Case: data.Case{ID: g.id, Weight: 1}}
		for ch := 0; ch < channels; ch++ {
			f, ok := g.files[ch]
			if !ok {
				return nil, fmt.Errorf("case %s (%s): no channel %04d file %s_%04d%s; the model takes %d channels",
					g.id, filepath.Dir(key), ch, g.id, ch, imageExt(anyFile(g.files)), channels)
			}
			c.Images = append(c.Images, f)
		}
		if len(g.files) > channels {
			return nil, tooMany(g)
		}
		c.Ext = outputExt(imageExt(c.Images[0]))
		cases = append(cases, c)
	}
	return cases, nil
}

// anyFile returns one of the files (the lowest channel's).
func anyFile(files map[int]string) string {
	best := -1
	for ch := range files {
		if best < 0 || ch < best {
			best = ch
		}
	}
	return files[best]
}

// outputExt is the ending of the label map predicted from an input with
// ending ext: the input's own, as nnU-Net writes the dataset's
// file_ending (CASE.nrrd from CASE_0000.nrrd, a .hdr/.img pair from a
// pair), so that the predictions pair with the references by name;
// .nii.gz for an input of no file ending (a Zarr store).
func outputExt(ext string) string {
	if volume.Writes("x" + ext) {
		return ext
	}
	return ".nii.gz"
}

// CheckCase reads the headers of case c's files and checks that they hold
// channels channels on one grid, so a wrong or unreadable file is an
// error naming it before any case is predicted.
func CheckCase(c data.Case, channels int) error {
	var shape [3]int
	total := 0
	for i, path := range c.Images {
		f, err := volume.Open(path)
		if err != nil {
			return fmt.Errorf("case %s: %w", c.ID, err)
		}
		h := f.Header()
		f.Close()
		// A case is predicted whole: a volume too large to decode at
		// once fails here, before any case is predicted, and the error
		// points to blockwise prediction.
		if err := volume.CheckInMemory(h.Shape, h.Channels); err != nil {
			return fmt.Errorf("case %s: %s: %w (here: -o OUT.zarr, with --roi for a part of it)", c.ID, path, err)
		}
		if i == 0 {
			shape = h.Shape
		} else if h.Shape != shape {
			return fmt.Errorf("case %s: %s has shape %v, %s %v", c.ID, path, h.Shape, c.Images[0], shape)
		}
		total += h.Channels
	}
	if total != channels {
		what := fmt.Sprintf("%s holds %d channels", c.Images[0], total)
		if len(c.Images) > 1 {
			what = fmt.Sprintf("its %d files hold %d channels", len(c.Images), total)
		}
		return fmt.Errorf("case %s: %s, the model takes %d", c.ID, what, channels)
	}
	return nil
}
