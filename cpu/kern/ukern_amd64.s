//go:build amd64 && !purego

#include "textflag.h"

// Field offsets of ukArgs (checked by TestUkArgsLayout).
#define A_PTR     0
#define AOFF_PTR  24
#define AOFF_LEN  32
#define TAPS_PTR  48
#define TAPS_LEN  56
#define RUN       72
#define ASTR      80
#define B_PTR     88
#define BOFF      112
#define BSTR      120
#define C_PTR     128
#define COFF_PTR  152
#define MLAST     176
#define MODE      184
#define BIAS_PTR  192

// One k-step of the 6x16 tile: two 8-wide B loads, six broadcasts of A
// (one per row, all at byte index AX from the row pointers), 12 FMAs into
// the accumulators Y0..Y11 (row j in Y(2j), Y(2j+1)).
#define STEP \
	VMOVUPS      (BX), Y12;         \
	VMOVUPS      32(BX), Y13;       \
	VBROADCASTSS (SI)(AX*1), Y14;   \
	VFMADD231PS  Y12, Y14, Y0;      \
	VFMADD231PS  Y13, Y14, Y1;      \
	VBROADCASTSS (DI)(AX*1), Y15;   \
	VFMADD231PS  Y12, Y15, Y2;      \
	VFMADD231PS  Y13, Y15, Y3;      \
	VBROADCASTSS (R8)(AX*1), Y14;   \
	VFMADD231PS  Y12, Y14, Y4;      \
	VFMADD231PS  Y13, Y14, Y5;      \
	VBROADCASTSS (R9)(AX*1), Y15;   \
	VFMADD231PS  Y12, Y15, Y6;      \
	VFMADD231PS  Y13, Y15, Y7;      \
	VBROADCASTSS (R10)(AX*1), Y14;  \
	VFMADD231PS  Y12, Y14, Y8;      \
	VFMADD231PS  Y13, Y14, Y9;      \
	VBROADCASTSS (R11)(AX*1), Y15;  \
	VFMADD231PS  Y12, Y15, Y10;     \
	VFMADD231PS  Y13, Y15, Y11

// Store row accumulators ya, yb to the C row whose offset is at off(R12);
// AX = C base.
#define ST(off, ya, yb) \
	MOVQ    off(R12), SI;           \
	VMOVUPS ya, (AX)(SI*4);         \
	VMOVUPS yb, 32(AX)(SI*4)

// Same, adding the previous C contents first.
#define ADDST(off, ya, yb) \
	MOVQ    off(R12), SI;           \
	VADDPS  (AX)(SI*4), ya, ya;     \
	VADDPS  32(AX)(SI*4), yb, yb;   \
	VMOVUPS ya, (AX)(SI*4);         \
	VMOVUPS yb, 32(AX)(SI*4)

// Row pointer j: SI = A base (in AX) + 4*aoff[j] (aoff row at R12).
#define ROWPTR(off, reg) \
	MOVQ off(R12), reg;             \
	LEAQ (AX)(reg*4), reg

// func ukernAsm(p *ukArgs)
TEXT ·ukernAsm(SB), NOSPLIT, $40-8
	MOVQ p+0(FP), R13
	MOVQ AOFF_PTR(R13), AX
	MOVQ AX, tileA-8(SP)
	MOVQ COFF_PTR(R13), AX
	MOVQ AX, tileC-16(SP)
	MOVQ AOFF_LEN(R13), AX
	XORQ DX, DX
	MOVQ $6, CX
	DIVQ CX
	TESTQ AX, AX
	JZ   done
	MOVQ AX, left-24(SP)
	MOVQ BSTR(R13), AX
	SHLQ $2, AX
	MOVQ AX, bstrb-32(SP)
	MOVQ RUN(R13), AX
	IMULQ ASTR(R13), AX
	SHLQ $2, AX
	MOVQ AX, runb-40(SP)

tile:
	MOVQ p+0(FP), R13
	// Accumulators start at bias (modeBias) or zero.
	MOVQ MODE(R13), AX
	CMPQ AX, $1
	JNE  zero
	MOVQ    BIAS_PTR(R13), AX
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y1, Y3
	VMOVAPS Y0, Y4
	VMOVAPS Y1, Y5
	VMOVAPS Y0, Y6
	VMOVAPS Y1, Y7
	VMOVAPS Y0, Y8
	VMOVAPS Y1, Y9
	VMOVAPS Y0, Y10
	VMOVAPS Y1, Y11
	JMP  setup

zero:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

setup:
	MOVQ tileA-8(SP), R12
	MOVQ A_PTR(R13), AX
	ROWPTR(0, SI)
	ROWPTR(8, DI)
	ROWPTR(16, R8)
	ROWPTR(24, R9)
	ROWPTR(32, R10)
	ROWPTR(40, R11)
	MOVQ B_PTR(R13), BX
	MOVQ BOFF(R13), CX
	LEAQ (BX)(CX*4), BX
	MOVQ ASTR(R13), DX
	SHLQ $2, DX
	MOVQ TAPS_PTR(R13), R12
	MOVQ TAPS_LEN(R13), R13
	TESTQ R13, R13
	JZ   store

tap:
	MOVQ (R12), AX
	SHLQ $2, AX
	MOVQ runb-40(SP), CX
	ADDQ AX, CX

step:
	STEP
	ADDQ bstrb-32(SP), BX
	ADDQ DX, AX
	CMPQ AX, CX
	JNE  step

	ADDQ $8, R12
	DECQ R13
	JNZ  tap

store:
	MOVQ p+0(FP), R13
	MOVQ $6, CX
	MOVQ left-24(SP), AX
	CMPQ AX, $1
	JNE  rows
	MOVQ MLAST(R13), CX

rows:
	MOVQ MODE(R13), BX
	MOVQ C_PTR(R13), AX
	MOVQ tileC-16(SP), R12
	CMPQ BX, $2
	JEQ  accum

	ST(0, Y0, Y1)
	CMPQ CX, $1
	JLE  next
	ST(8, Y2, Y3)
	CMPQ CX, $2
	JLE  next
	ST(16, Y4, Y5)
	CMPQ CX, $3
	JLE  next
	ST(24, Y6, Y7)
	CMPQ CX, $4
	JLE  next
	ST(32, Y8, Y9)
	CMPQ CX, $5
	JLE  next
	ST(40, Y10, Y11)
	JMP  next

accum:
	ADDST(0, Y0, Y1)
	CMPQ CX, $1
	JLE  next
	ADDST(8, Y2, Y3)
	CMPQ CX, $2
	JLE  next
	ADDST(16, Y4, Y5)
	CMPQ CX, $3
	JLE  next
	ADDST(24, Y6, Y7)
	CMPQ CX, $4
	JLE  next
	ADDST(32, Y8, Y9)
	CMPQ CX, $5
	JLE  next
	ADDST(40, Y10, Y11)

next:
	ADDQ $48, tileA-8(SP)
	ADDQ $48, tileC-16(SP)
	DECQ left-24(SP)
	JNZ  tile

done:
	VZEROUPPER
	RET
