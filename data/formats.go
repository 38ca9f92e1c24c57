package data

// The volume formats the pipeline reads. Each registers itself with
// package volume when linked in, and the pipeline opens every file through
// volume.Open, so a new format (a package implementing volume.File) is one
// more line here.
import (
	_ "github.com/voxtrain/voxtrain/metaimage" // .mha, .mhd + .raw/.zraw
	_ "github.com/voxtrain/voxtrain/nifti"     // .nii, .nii.gz, .hdr/.img
	_ "github.com/voxtrain/voxtrain/nrrd"      // .nrrd, .nhdr + data file
	_ "github.com/voxtrain/voxtrain/tiff"      // .tif, .tiff stacks
	_ "github.com/voxtrain/voxtrain/zarr"      // .zarr, .ome.zarr (v2, v3, OME-NGFF 0.4/0.5), .n5
)
