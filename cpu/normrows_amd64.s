//go:build amd64 && !purego

#include "textflag.h"

// The AVX2 twins of normrows.go's Go loops: the same float operations in
// the same order (no FMA), so results are bit-identical. Channels go 8 at
// a time, then one group of 4 where c4 is not a multiple of 8. The
// activation max(z, slope·z) for slope ≤ 1 is a blend on z's sign bit
// between the value times slope and the value itself, as the Go loops
// multiply by fac[signBit(z)] = {1, slope}. Callers guarantee rows ≥ 1 and
// c4 ≥ 4, a multiple of 4. Per-channel parameters come interleaved by
// groups of channels (interleave), one pointer for all.
//
// Register use in every loop: SI, DI (and R9) row pointers, DX the row
// stride in bytes, CX rows left, AX the channel, R10 = c4, R13 = c4 − 8
// (the last channel an 8-wide group may start at), BX the parameters of
// the channel group.

// func normSumsAVX2(x *float32, rows, c, c4 int, s, q *float64)
TEXT ·normSumsAVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ rows+8(FP), CX
	MOVQ c+16(FP), DX
	MOVQ c4+24(FP), R10
	MOVQ s+32(FP), R8
	MOVQ q+40(FP), R9
	SHLQ $2, DX
	LEAQ -8(R10), R13

sums_row:
	XORQ AX, AX
	CMPQ AX, R13
	JGT  sums_tail

sums_ch:
	VCVTPS2PD (SI)(AX*4), Y0
	VCVTPS2PD 16(SI)(AX*4), Y1
	VMULPD    Y0, Y0, Y2
	VMULPD    Y1, Y1, Y3
	VADDPD    (R8)(AX*8), Y0, Y0
	VADDPD    32(R8)(AX*8), Y1, Y1
	VADDPD    (R9)(AX*8), Y2, Y2
	VADDPD    32(R9)(AX*8), Y3, Y3
	VMOVUPD   Y0, (R8)(AX*8)
	VMOVUPD   Y1, 32(R8)(AX*8)
	VMOVUPD   Y2, (R9)(AX*8)
	VMOVUPD   Y3, 32(R9)(AX*8)
	ADDQ      $8, AX
	CMPQ      AX, R13
	JLE       sums_ch

sums_tail:
	CMPQ      AX, R10
	JGE       sums_next
	VCVTPS2PD (SI)(AX*4), Y0
	VMULPD    Y0, Y0, Y2
	VADDPD    (R8)(AX*8), Y0, Y0
	VADDPD    (R9)(AX*8), Y2, Y2
	VMOVUPD   Y0, (R8)(AX*8)
	VMOVUPD   Y2, (R9)(AX*8)

sums_next:
	ADDQ DX, SI
	DECQ CX
	JNZ  sums_row
	VZEROUPPER
	RET

// func normActAVX2(x, y *float32, rows, c, c4 int, p *float32, slope float32)
// p: mean, scale, shift by channel groups.
TEXT ·normActAVX2(SB), NOSPLIT, $0-52
	MOVQ         x+0(FP), SI
	MOVQ         y+8(FP), DI
	MOVQ         rows+16(FP), CX
	MOVQ         c+24(FP), DX
	MOVQ         c4+32(FP), R10
	MOVQ         p+40(FP), R8
	VBROADCASTSS slope+48(FP), Y15
	SHLQ         $2, DX
	LEAQ         -8(R10), R13

act_row:
	XORQ AX, AX
	MOVQ R8, BX
	CMPQ AX, R13
	JGT  act_tail

act_ch:
	VMOVUPS   (SI)(AX*4), Y0
	VSUBPS    (BX), Y0, Y0         // x − mean
	VMULPS    32(BX), Y0, Y0       // · scale
	VADDPS    64(BX), Y0, Y0       // + shift = z
	VMULPS    Y15, Y0, Y1          // z · slope
	VBLENDVPS Y0, Y1, Y0, Y0       // z < 0 ? z·slope : z
	VMOVUPS   Y0, (DI)(AX*4)
	ADDQ      $96, BX
	ADDQ      $8, AX
	CMPQ      AX, R13
	JLE       act_ch

act_tail:
	CMPQ      AX, R10
	JGE       act_next
	VMOVUPS   (SI)(AX*4), X0
	VSUBPS    (BX), X0, X0
	VMULPS    16(BX), X0, X0
	VADDPS    32(BX), X0, X0
	VMULPS    X15, X0, X1
	VBLENDVPS X0, X1, X0, X0
	VMOVUPS   X0, (DI)(AX*4)

act_next:
	ADDQ DX, SI
	ADDQ DX, DI
	DECQ CX
	JNZ  act_row
	VZEROUPPER
	RET

// func normActGradSumsAVX2(x, dy *float32, rows, c, c4 int, p *float32, slope float32, sg, sgx *float64)
// p: mean, scale, shift by channel groups.
TEXT ·normActGradSumsAVX2(SB), NOSPLIT, $0-72
	MOVQ         x+0(FP), SI
	MOVQ         dy+8(FP), DI
	MOVQ         rows+16(FP), CX
	MOVQ         c+24(FP), DX
	MOVQ         c4+32(FP), R10
	MOVQ         p+40(FP), R8
	VBROADCASTSS slope+48(FP), Y15
	MOVQ         sg+56(FP), R11
	MOVQ         sgx+64(FP), R12
	SHLQ         $2, DX
	LEAQ         -8(R10), R13

gs_row:
	XORQ AX, AX
	MOVQ R8, BX
	CMPQ AX, R13
	JGT  gs_tail

gs_ch:
	VMOVUPS      (SI)(AX*4), Y0
	VSUBPS       (BX), Y0, Y1
	VMULPS       32(BX), Y1, Y1
	VADDPS       64(BX), Y1, Y1      // z
	VMOVUPS      (DI)(AX*4), Y2
	VMULPS       Y15, Y2, Y3
	VBLENDVPS    Y1, Y3, Y2, Y2      // g = z < 0 ? dy·slope : dy
	VCVTPS2PD    X2, Y4              // g, channels 0-3
	VEXTRACTF128 $1, Y2, X5
	VCVTPS2PD    X5, Y5              // g, channels 4-7
	VCVTPS2PD    X0, Y6              // x, channels 0-3
	VCVTPS2PD    16(SI)(AX*4), Y7    // x, channels 4-7
	VMULPD       Y4, Y6, Y6          // g·x
	VMULPD       Y5, Y7, Y7
	VADDPD       (R11)(AX*8), Y4, Y4
	VADDPD       32(R11)(AX*8), Y5, Y5
	VADDPD       (R12)(AX*8), Y6, Y6
	VADDPD       32(R12)(AX*8), Y7, Y7
	VMOVUPD      Y4, (R11)(AX*8)
	VMOVUPD      Y5, 32(R11)(AX*8)
	VMOVUPD      Y6, (R12)(AX*8)
	VMOVUPD      Y7, 32(R12)(AX*8)
	ADDQ         $96, BX
	ADDQ         $8, AX
	CMPQ         AX, R13
	JLE          gs_ch

gs_tail:
	CMPQ      AX, R10
	JGE       gs_next
	VMOVUPS   (SI)(AX*4), X0
	VSUBPS    (BX), X0, X1
	VMULPS    16(BX), X1, X1
	VADDPS    32(BX), X1, X1
	VMOVUPS   (DI)(AX*4), X2
	VMULPS    X15, X2, X3
	VBLENDVPS X1, X3, X2, X2
	VCVTPS2PD X2, Y4
	VCVTPS2PD X0, Y6
	VMULPD    Y4, Y6, Y6
	VADDPD    (R11)(AX*8), Y4, Y4
	VADDPD    (R12)(AX*8), Y6, Y6
	VMOVUPD   Y4, (R11)(AX*8)
	VMOVUPD   Y6, (R12)(AX*8)

gs_next:
	ADDQ DX, SI
	ADDQ DX, DI
	DECQ CX
	JNZ  gs_row
	VZEROUPPER
	RET

// func normActGradAVX2(x, dy, dx *float32, rows, c, c4 int, p *float32, slope float32)
// p: mean, scale, shift, A, B, C by channel groups.
TEXT ·normActGradAVX2(SB), NOSPLIT, $0-60
	MOVQ         x+0(FP), SI
	MOVQ         dy+8(FP), DI
	MOVQ         dx+16(FP), R9
	MOVQ         rows+24(FP), CX
	MOVQ         c+32(FP), DX
	MOVQ         c4+40(FP), R10
	MOVQ         p+48(FP), R8
	VBROADCASTSS slope+56(FP), Y15
	SHLQ         $2, DX
	LEAQ         -8(R10), R13

ga_row:
	XORQ AX, AX
	MOVQ R8, BX
	CMPQ AX, R13
	JGT  ga_tail

ga_ch:
	VMOVUPS   (SI)(AX*4), Y0
	VSUBPS    (BX), Y0, Y0         // xc = x − mean
	VMULPS    32(BX), Y0, Y1
	VADDPS    64(BX), Y1, Y1       // z = xc·scale + shift
	VMOVUPS   (DI)(AX*4), Y2
	VMULPS    Y15, Y2, Y3
	VBLENDVPS Y1, Y3, Y2, Y2       // g
	VMULPS    96(BX), Y2, Y2       // A·g
	VMULPS    128(BX), Y0, Y0      // B·xc
	VADDPS    Y0, Y2, Y2
	VADDPS    160(BX), Y2, Y2      // + C
	VMOVUPS   Y2, (R9)(AX*4)
	ADDQ      $192, BX
	ADDQ      $8, AX
	CMPQ      AX, R13
	JLE       ga_ch

ga_tail:
	CMPQ      AX, R10
	JGE       ga_next
	VMOVUPS   (SI)(AX*4), X0
	VSUBPS    (BX), X0, X0
	VMULPS    16(BX), X0, X1
	VADDPS    32(BX), X1, X1
	VMOVUPS   (DI)(AX*4), X2
	VMULPS    X15, X2, X3
	VBLENDVPS X1, X3, X2, X2
	VMULPS    48(BX), X2, X2
	VMULPS    64(BX), X0, X0
	VADDPS    X0, X2, X2
	VADDPS    80(BX), X2, X2
	VMOVUPS   X2, (R9)(AX*4)

ga_next:
	ADDQ DX, SI
	ADDQ DX, DI
	ADDQ DX, R9
	DECQ CX
	JNZ  ga_row
	VZEROUPPER
	RET
