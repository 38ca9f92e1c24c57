// Package kern holds the CPU compute kernels behind voxtrain's CPU device:
// 3D convolution forward, backward-data and backward-weight in channels-last
// layout, and the GEMM they are built on.
//
// Every fast kernel has a plain reference implementation beside it (the
// *Ref functions) that is written for clarity, not speed; tests hold the fast
// kernels to the references.
//
// Layout (channels-last, "NDHWC"):
//
//	activations x[n][d][h][w][c]        index ((((n*D+d)*H+h)*W+w)*C + c)
//	weights     w[co][kd][kh][kw][ci]   index ((((co*KD+kd)*KH+kh)*KW+kw)*Ci + ci)
//
// so that the convolution's reduction dimension (kd,kh,kw,ci) is contiguous in
// both the weights and a vol2col row. A convolution's sizes, strides and
// padding are a geom.Conv (internal/geom), the type every layer shares.
//
// # Fast kernels
//
// Engine runs every op as an implicit GEMM on one register-tile micro-kernel
// (6 rows × 16 columns, AVX2+FMA assembly on amd64 when the CPU has both,
// portable Go otherwise; see ukern.go). No vol2col matrix is built: the
// kernel reads its rows straight out of a zero-padded copy of the few input
// planes the current output plane needs (a per-goroutine ring of kernel-depth
// planes), through a table of tap offsets, so the (kw, ci) run of a tap is
// contiguous and no border test is ever made.
//
//   - Forward: rows are output voxels, columns output channels; the weights
//     are packed once per call into 16-channel panels.
//   - Backward-data: dx is split by the residue of its coordinates modulo the
//     stride; each residue class is a stride-1 convolution of dy with a
//     flipped sub-kernel (one class for stride 1; for kernel 2 stride 2 —
//     ConvTranspose3d — eight classes of one tap each, plain GEMMs).
//   - Backward-weight: rows are 6 weight positions (kd, kh, kw, ci), columns
//     16 output channels, and the reduction runs over output voxels in blocks
//     of ~128 that stay in L1 while every weight row passes over them; the
//     bias gradient is one more row whose input is a plane of ones.
//
// Work is split over goroutines by output planes (or weight rows), never by
// a reduction's order, so results are bit-identical for any thread count
// (see Engine).
package kern
