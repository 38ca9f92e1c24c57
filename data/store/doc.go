// Package store is voxtrain's prepared on-disk dataset: every case decoded
// once to float32 (after the deterministic preprocessing), cut into cubic
// chunks, each chunk compressed on its own, with an index. Reading a patch
// decompresses only the chunks it overlaps.
//
// Layout of a store folder:
//
//	index.json     store version, preprocessing fingerprint, chunk edge,
//	               codec, and per case: its data file, shape, and the size,
//	               mtime and SHA-256 of every source file it was made from
//	<case>.vxs     one file per case (format below)
//
// A case file is little-endian:
//
//	"VXSTORE1"
//	u32 version (1), D, H, W, channels, has-label, chunk edge, codec
//	    (1 = S2, 2 = zstd, +16 byte-shuffled; 3 = raw), len(extra), chunks
//	    per array
//	table: for each array (image channels, then the label), for each chunk
//	    (z slowest, x fastest): u64 offset, u32 compressed length
//	extra: opaque bytes the writer attached (voxtrain: the foreground index)
//	chunk data; an edge chunk holds only the voxels inside the volume
//
// Image chunks hold float32, the label chunk uint8 class indices.
//
// The raw codec stores chunks uncompressed (4 bytes a voxel), 64-byte
// aligned, and reads them through a read-only memory map where the system
// has one: a patch read is then a copy of the patch's rows straight from
// the page cache, with no decompression and no read buffer. It trades disk
// (and page cache) for speed, as nnU-Net's unpacked .npy files do.
//
// A store is data other users' runs read: its folder and files are made
// with the umask's permissions (0755 and 0644 under umask 022). Each file
// is written under a temporary name (.tmp-…) and renamed into place; a
// writer killed mid-write leaves its temporary file, which the next
// Writer removes, unless another writer holds the folder (an advisory
// lock, see NewWriter), when only those older than an hour go.
package store
