// Package nifti reads and writes NIfTI-1 and NIfTI-2 images: .nii,
// .nii.gz and .hdr/.img pairs (either member optionally gzipped), every
// datatype, both byte orders. Header values, scaling and the affine are
// computed as nibabel computes them, so voxtrain sees a volume as a Python
// pipeline built on nibabel does.
//
// Reader and File decode the voxels straight to float32 in one pass
// (gzip through internal/inflate) and can stop after a prefix of them: a
// crop that ends at plane z needs nothing after it. Malformed input is a
// *FormatError naming the file, the field and the byte offset, never a
// panic, and a gzipped file's decompressed size is capped before anything
// is allocated for it (Reader.MaxGzipBytes).
//
// Writer writes each file through internal/atomicfile: a reader never
// sees a half-written file.
package nifti
