// Package zarr reads chunked array stores as volumes: Zarr v2 (.zarray),
// Zarr v3 (zarr.json, with sharding), OME-NGFF 0.4 and 0.5 multiscale
// images on top of them, and N5 (attributes.json). A store is a directory
// (case.zarr, case.ome.zarr, case.n5), or an array inside one
// (case.ome.zarr/1 picks a multiscale level by its path).
//
// Reads are lazy: ReadRegion decodes only the chunks its box overlaps,
// concurrently, through a byte-bounded LRU cache of decoded chunks that
// the file's reads share. Nothing of a chunk is trusted: every length in a
// chunk or a compressed stream is checked against what the metadata says
// the chunk holds, so a corrupt store is an error naming the chunk's file,
// never a panic or an allocation larger than the metadata justifies.
//
// The codecs are Go: blosc's container and its blosclz codec are
// implemented here (blosc.go, blosclz.go); zlib, gzip and bzip2 come from
// the standard library and klauspost/compress, zstd from
// klauspost/compress, lz4 from pierrec/lz4 and xz from ulikunitz/xz.
package zarr
