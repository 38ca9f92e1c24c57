// Package kernels holds voxtrain's CUDA C kernels: the .cu sources, the PTX
// generated from them for compute_80 (committed under ptx/ and embedded, so
// building needs no CUDA toolkit), a table describing every kernel's
// parameters and launch shape (All, Lookup), and launch recipes (Ops) that
// turn each nn.Device operation other than the GEMMs into the sequence of
// launches that computes it.
//
// Modules (one .cu file each): elementwise (fills, copy, scale, add,
// activations, channel bias, concat/split, layout transposes, label
// resampling, one-hot), conv (vol2col/col2vol around cuBLAS's GEMMs),
// reduce (deterministic channel and flat sums), norm (instance norm fused
// with the activation), loss (softmax, cross-entropy and Dice sums, their
// backward, sigmoid BCE, the multi-label sigmoid loss and its backward,
// TP/FP/FN counts), skel (clDice's soft skeleton), optim (SGD, AdamW), cast
// (float32 <-> bfloat16).
//
// The package is pure Go and imports no CUDA binding: package gpu loads the
// PTX with cuModuleLoadData and implements Launcher with cuLaunchKernel;
// package kernels/emu implements Launcher by running the same .cu sources on
// the host (compiled by g++ with a header that emulates CUDA's built-ins),
// which is how CI checks every kernel against the CPU device without a GPU.
//
// Regenerating the PTX (after editing a .cu file) needs nvcc:
//
//	kernels/gen_ptx.sh      # make kernels
//	kernels/check_ptx.sh    # fails when nvcc is present and the PTX is stale
//
// and TestPTXUpToDate fails everywhere (nvcc or not) when a source changed
// since the PTX was generated, by comparing hashes recorded by gen_ptx.sh.
//
// Layouts are nn's: channels-last activations (N, D, H, W, C), labels
// (N, D, H, W) as float class indices, conv weights (O, kD, kH, kW, I).
package kernels

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Block is the number of threads per block of every kernel (1-D blocks).
// Kernels with shared-memory reductions are written for exactly this size
// (VT_BLOCK in common.cuh).
const Block = 256

// NoBadLabel is the value of a bad-label cell after a launch that met only
// valid labels; otherwise the cell holds the smallest flat voxel index
// (n·V + v) whose label is not a class index.
const NoBadLabel = 0x7fffffff

// Kernel describes one kernel entry point.
type Kernel struct {
	// Module is the PTX module holding the kernel: the base name of its .cu
	// file, the argument of PTX.
	Module string
	// Name is the entry point's name in the PTX.
	Name string
	// Params lists the parameter kinds in order, one letter each:
	// p device pointer (.u64), i int32 (.u32), f float32, d float64.
	Params string
	// Grid says how the launch grid is sized (blocks of Block threads).
	Grid string
	// SharedBytes is the static shared memory per block.
	SharedBytes int
}

// Grid descriptions shared by many kernels.
const (
	gridStride = "1-D grid-stride: min(ceil(work/Block), MaxGrid) blocks"
	gridChunks = "(ceil(voxels/chunk), N): one block per chunk of one sample"
	gridBlocks = "1-D: min(work, MaxGrid) blocks, one per output, striding over the rest"
)

// MaxGrid caps the blocks of grid-stride launches: enough to fill any
// current GPU, few enough to keep per-block overheads small.
const MaxGrid = 8192

// The kernels, by module. Params must match the .cu signatures (checked
// against the PTX by TestTableMatchesPTX and against the emulation's
// registry by kernels/emu).
var (
	kFill             = Kernel{"elementwise", "fill_f32", "pif", gridStride + ", work n", 0}
	kFillI32          = Kernel{"elementwise", "fill_i32", "pii", gridStride + ", work n", 0}
	kScale            = Kernel{"elementwise", "scale_f32", "pif", gridStride + ", work n", 0}
	kCopy             = Kernel{"elementwise", "copy_f32", "ppi", gridStride + ", work n", 0}
	kAdd              = Kernel{"elementwise", "add_f32", "ppi", gridStride + ", work n", 0}
	kActForward       = Kernel{"elementwise", "act_forward", "ppif", gridStride + ", work n", 0}
	kActBackward      = Kernel{"elementwise", "act_backward", "pppif", gridStride + ", work n", 0}
	kAddChannelBias   = Kernel{"elementwise", "add_channel_bias", "ppii", gridStride + ", work rows·c", 0}
	kConcatChannels   = Kernel{"elementwise", "concat_channels", "pppiii", gridStride + ", work voxels·(ca+cb)", 0}
	kSplitChannels    = Kernel{"elementwise", "split_channels", "pppiii", gridStride + ", work voxels·(ca+cb)", 0}
	kNCDHWToNDHWC     = Kernel{"elementwise", "ncdhw_to_ndhwc", "ppiii", gridStride + ", work n·c·v", 0}
	kNDHWCToNCDHW     = Kernel{"elementwise", "ndhwc_to_ncdhw", "ppiii", gridStride + ", work n·c·v", 0}
	kChannelAffineAdd = Kernel{"elementwise", "channel_affine_add", "ppppiii", gridStride + ", work n·v·c", 0}
	kDownsampleLabels = Kernel{"elementwise", "downsample_labels", "ppiiiiiii", gridStride + ", work n·od·oh·ow", 0}
	kOneHot           = Kernel{"elementwise", "one_hot", "pppii", gridStride + ", work nvox", 0}
	// Average pooling over windows at stride = size (the residual
	// encoder's skip connections), and its adjoint; the _bf16 twins for
	// bf16 activations and activation gradients.
	kAvgPool             = Kernel{"elementwise", "avg_pool", "pp" + strings.Repeat("i", 8), gridStride + ", work n·od·oh·ow·c", 0}
	kAvgPoolBF16         = Kernel{"elementwise", "avg_pool_bf16", "pp" + strings.Repeat("i", 8), gridStride + ", work n·od·oh·ow·c", 0}
	kAvgPoolBackward     = Kernel{"elementwise", "avg_pool_backward", "pp" + strings.Repeat("i", 8), gridStride + ", work n·d·h·w·c", 0}
	kAvgPoolBackwardBF16 = Kernel{"elementwise", "avg_pool_backward_bf16", "pp" + strings.Repeat("i", 8), gridStride + ", work n·d·h·w·c", 0}
	// The _bf16 twins for bf16 activation storage: same parameters, the
	// activation operands bf16 (see elementwise.cu).
	kActForwardBF16     = Kernel{"elementwise", "act_forward_bf16", "ppif", gridStride + ", work n", 0}
	kActBackwardBF16    = Kernel{"elementwise", "act_backward_bf16", "pppif", gridStride + ", work n", 0}
	kAddChannelBiasBF16 = Kernel{"elementwise", "add_channel_bias_bf16", "ppii", gridStride + ", work rows·c", 0}
	kConcatChannelsBF16 = Kernel{"elementwise", "concat_channels_bf16", "pppiii", gridStride + ", work voxels·(ca+cb)", 0}
	// ... and for bf16 activation gradients: the add, the split of a
	// concat's gradient and the activation's backward with bf16 dy, dx.
	kAddBF16           = Kernel{"elementwise", "add_bf16", "ppi", gridStride + ", work n", 0}
	kSplitChannelsBF16 = Kernel{"elementwise", "split_channels_bf16", "pppiii", gridStride + ", work voxels·(ca+cb)", 0}
	kActBackwardBF16G  = Kernel{"elementwise", "act_backward_bf16g", "pppif", gridStride + ", work n", 0}

	kVol2Col = Kernel{"conv", "vol2col", "pp" + strings.Repeat("i", 15), gridStride + ", work rows·K", 0}
	kCol2Vol = Kernel{"conv", "col2vol", "pp" + strings.Repeat("i", 17), gridStride + ", work vcount·InC", 0}
	// vol2col_bf16: a thread per row and channel group (4 channels, or 1
	// when InC is not a multiple of 4).
	kVol2ColBF16 = Kernel{"conv", "vol2col_bf16", "pp" + strings.Repeat("i", 15), gridStride + ", work rows·InC/4", 0}
	// vol2col_bf16x: vol2col_bf16 reading a bf16 x. col2vol_bf16: col2vol
	// into a bf16 dx through a float32 carry between tiles.
	kVol2ColBF16X = Kernel{"conv", "vol2col_bf16x", "pp" + strings.Repeat("i", 15), gridStride + ", work rows·InC/4", 0}
	kCol2VolBF16  = Kernel{"conv", "col2vol_bf16", "pppp" + strings.Repeat("i", 19), gridStride + ", work vcount·InC/4", 0}

	kChannelSumPartial = Kernel{"reduce", "channel_sum_partial", "pppiii", gridChunks, (2*8 + 8*8) * Block}
	kSumSqPartial      = Kernel{"reduce", "sumsq_partial", "ppii", "ceil(n/chunk): one block per chunk", 8 * Block}
	kReduceChunksF64   = Kernel{"reduce", "reduce_chunks_f64", "ppiii", gridBlocks + ", work rows·w", 8 * Block}
	kReduceChunksF32   = Kernel{"reduce", "reduce_chunks_f32", "ppiii", gridBlocks + ", work rows·w", 8 * Block}
	// The tensor-list reductions (see TensorList): sumsq_partial over
	// every chunk of a list, then each tensor's chunks added up.
	kSumSqPartialList = Kernel{"reduce", "sumsq_partial_list", "ppppii", gridBlocks + ", work chunks", 8 * Block}
	kReduceRangesF64  = Kernel{"reduce", "reduce_ranges_f64", "pppi", gridBlocks + ", work tensors", 8 * Block}
	// channel_sum_partial_bf16: the partial channel sums of a bf16 tensor.
	kChannelSumPartialBF16 = Kernel{"reduce", "channel_sum_partial_bf16", "pppiii", gridChunks, (2*8 + 8*8) * Block}

	kINFwdPartial = Kernel{"norm", "instnorm_fwd_partial", "ppiii", gridChunks, (2*8 + 2*8*8) * Block}
	kINFwdStats   = Kernel{"norm", "instnorm_fwd_stats", "ppiiiif", gridBlocks + ", work n·c", 8 * Block}
	kINFwdApply   = Kernel{"norm", "instnorm_fwd_apply", "pppppiiif", gridStride + ", work n·v·c", 0}
	kINBwdPartial = Kernel{"norm", "instnorm_bwd_partial", "ppppppiiif", gridChunks, (2*8 + 2*8*8) * Block}
	kINBwdFinish  = Kernel{"norm", "instnorm_bwd_finish", "pppppiiii", gridBlocks + ", work n·c", 8 * Block}
	kINBwdAffine  = Kernel{"norm", "instnorm_bwd_affine", "pppii", gridStride + ", work c", 0}
	kINBwdApply   = Kernel{"norm", "instnorm_bwd_apply", "pppppppiiif", gridStride + ", work n·v·c", 0}
	// The _bf16 twins read a bf16 x (and write a bf16 y), see norm.cu.
	kINFwdPartialBF16 = Kernel{"norm", "instnorm_fwd_partial_bf16", "ppiii", gridChunks, (2*8 + 2*8*8) * Block}
	kINFwdApplyBF16   = Kernel{"norm", "instnorm_fwd_apply_bf16", "pppppiiif", gridStride + ", work n·v·c", 0}
	kINBwdPartialBF16 = Kernel{"norm", "instnorm_bwd_partial_bf16", "ppppppiiif", gridChunks, (2*8 + 2*8*8) * Block}
	kINBwdApplyBF16   = Kernel{"norm", "instnorm_bwd_apply_bf16", "pppppppiiif", gridStride + ", work n·v·c", 0}
	// The _bf16g twins read bf16 x and dy and write a bf16 dx.
	kINBwdPartialBF16G = Kernel{"norm", "instnorm_bwd_partial_bf16g", "ppppppiiif", gridChunks, (2*8 + 2*8*8) * Block}
	kINBwdApplyBF16G   = Kernel{"norm", "instnorm_bwd_apply_bf16g", "pppppppiiif", gridStride + ", work n·v·c", 0}

	kSoftmax         = Kernel{"loss", "softmax", "ppii", gridStride + ", work nvox (voxels)", 0}
	kSoftmaxFwd      = Kernel{"loss", "softmax_fwd", "ppppppiiii", gridChunks, 8 * Block}
	kSegStatsPartial = Kernel{"loss", "seg_stats_partial", "pppiiii", gridChunks, 3 * 8 * Block}
	kSoftmaxLossBwd  = Kernel{"loss", "softmax_loss_bwd", "pppppppiiii", gridStride + ", work n·v (voxels)", 0}
	kSigmoidBCE      = Kernel{"loss", "sigmoid_bce", "pppppiiff", gridChunks, 8 * Block}
	kSegCounts       = Kernel{"loss", "seg_counts", "ppppiiii", gridStride + ", work nvox", 3 * 4 * 256}

	kSigmoidMultiLabelLoss    = Kernel{"loss", "sigmoid_multi_label_loss", "pppppiiii", gridChunks, 5 * 8 * Block}
	kSigmoidMultiLabelLossBwd = Kernel{"loss", "sigmoid_multi_label_loss_bwd", "ppppppiiii", gridStride + ", work n·v·c (elements)", 0}
	kSegCountsMultiLabel      = Kernel{"loss", "seg_counts_multi_label", "ppppiiii", gridStride + ", work nvox", 3 * 4 * 256}

	kSGD   = Kernel{"optim", "sgd_update", "pppifffif", gridStride + ", work n", 0}
	kAdamW = Kernel{"optim", "adamw_update", "ppppifffffff", gridStride + ", work n", 0}
	// The tensor-list updates: every parameter in one launch.
	kSGDList   = Kernel{"optim", "sgd_update_list", "pppiifffif", gridBlocks + ", work chunks", 0}
	kAdamWList = Kernel{"optim", "adamw_update_list", "pppiifffffff", gridBlocks + ", work chunks", 0}

	kSkelErode     = Kernel{"skel", "skel_erode", "ppiiiiii", gridStride + ", work n·d·h·w·c", 0}
	kSkelDilate    = Kernel{"skel", "skel_dilate", "ppiiiiii", gridStride + ", work n·d·h·w·c", 0}
	kSkelInit      = Kernel{"skel", "skel_init", "pppiiiiii", gridStride + ", work n·d·h·w·c", 0}
	kSkelStep      = Kernel{"skel", "skel_step", "ppppiiiiii", gridStride + ", work n·d·h·w·c", 0}
	kSkelBwdStep   = Kernel{"skel", "skel_bwd_step", "ppppppiiiiii", gridStride + ", work n·d·h·w·c", 0}
	kSkelDilateBwd = Kernel{"skel", "skel_dilate_bwd", "pppiiiiii", gridStride + ", work n·d·h·w·c", 0}
	kSkelErodeBwd  = Kernel{"skel", "skel_erode_bwd", "pppiiiiii", gridStride + ", work n·d·h·w·c", 0}
	kSkelAccum     = Kernel{"skel", "skel_accum", "ppiiiiii", gridStride + ", work n·d·h·w·c", 0}

	kF32ToBF16 = Kernel{"cast", "f32_to_bf16", "ppi", gridStride + ", work n", 0}
	kBF16ToF32 = Kernel{"cast", "bf16_to_f32", "ppi", gridStride + ", work n", 0}
)

var table = []Kernel{
	kFill, kFillI32, kCopy, kScale, kAdd, kActForward, kActBackward, kAddChannelBias,
	kConcatChannels, kSplitChannels, kNCDHWToNDHWC, kNDHWCToNCDHW, kChannelAffineAdd,
	kDownsampleLabels, kOneHot,
	kAvgPool, kAvgPoolBF16, kAvgPoolBackward, kAvgPoolBackwardBF16,
	kActForwardBF16, kActBackwardBF16, kAddChannelBiasBF16, kConcatChannelsBF16,
	kAddBF16, kSplitChannelsBF16, kActBackwardBF16G,
	kVol2Col, kCol2Vol, kVol2ColBF16, kVol2ColBF16X, kCol2VolBF16,
	kChannelSumPartial, kSumSqPartial, kReduceChunksF64, kReduceChunksF32, kChannelSumPartialBF16,
	kSumSqPartialList, kReduceRangesF64,
	kINFwdPartial, kINFwdStats, kINFwdApply, kINBwdPartial, kINBwdFinish, kINBwdAffine, kINBwdApply,
	kINFwdPartialBF16, kINFwdApplyBF16, kINBwdPartialBF16, kINBwdApplyBF16, kINBwdPartialBF16G, kINBwdApplyBF16G,
	kSoftmax, kSoftmaxFwd, kSegStatsPartial, kSoftmaxLossBwd, kSigmoidBCE, kSegCounts,
	kSigmoidMultiLabelLoss, kSigmoidMultiLabelLossBwd, kSegCountsMultiLabel,
	kSkelErode, kSkelDilate, kSkelInit, kSkelStep, kSkelBwdStep, kSkelDilateBwd, kSkelErodeBwd, kSkelAccum,
	kSGD, kAdamW, kSGDList, kAdamWList,
	kF32ToBF16, kBF16ToF32,
}

// All returns every kernel, grouped by module.
func All() []Kernel { return append([]Kernel(nil), table...) }

// Lookup returns the kernel with the given entry-point name.
func Lookup(name string) (Kernel, bool) {
	for _, k := range table {
		if k.Name == name {
			return k, true
		}
	}
	return Kernel{}, false
}

//go:embed ptx/*.ptx ptx/SOURCES.sha256
var ptxFS embed.FS

// The sources are embedded too: TestPTXUpToDate hashes them, and embedding
// them makes every package that imports kernels (kernels/emu, which
// compiles them with cgo) rebuild when a .cu file changes — the go command
// does not track C files included from outside a package's directory.
//
//go:embed *.cu *.cuh
var srcFS embed.FS

// Modules returns the names of the PTX modules, sorted.
func Modules() []string {
	ents, err := fs.Glob(ptxFS, "ptx/*.ptx")
	if err != nil {
		panic(err) // the pattern is constant and valid
	}
	mods := make([]string, len(ents))
	for i, e := range ents {
		mods[i] = strings.TrimSuffix(path.Base(e), ".ptx")
	}
	sort.Strings(mods)
	return mods
}

// PTX returns a copy of the PTX text of a module (a kernel's Module), for
// cuModuleLoadData (gorgonia.org/cu's LoadData adds the NUL terminator).
func PTX(module string) ([]byte, error) {
	b, err := ptxFS.ReadFile("ptx/" + module + ".ptx")
	if err != nil {
		return nil, fmt.Errorf("kernels: no PTX module %q (have %s)", module, strings.Join(Modules(), ", "))
	}
	return append([]byte(nil), b...), nil
}

// Sources returns the CUDA C sources (*.cu, *.cuh) the PTX was generated
// from.
func Sources() fs.FS { return srcFS }
