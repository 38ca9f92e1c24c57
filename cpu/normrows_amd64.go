//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// haveNormAsm reports whether the AVX2 norm loops (normrows_amd64.s) can run.
var haveNormAsm = cpu.X86.HasAVX2

// normSumsAVX2 is normSumsGo for channels [0, c4) of rows rows of stride c.
//
//go:noescape
func normSumsAVX2(x *float32, rows, c, c4 int, s, q *float64)

// normActAVX2 is normActGo for channels [0, c4); p holds mean, scale and
// shift interleaved by channel groups (interleave).
//
//go:noescape
func normActAVX2(x, y *float32, rows, c, c4 int, p *float32, slope float32)

// normActGradSumsAVX2 is normActGradSumsGo for channels [0, c4); p as for
// normActAVX2.
//
//go:noescape
func normActGradSumsAVX2(x, dy *float32, rows, c, c4 int, p *float32, slope float32, sg, sgx *float64)

// normActGradAVX2 is normActGradGo for channels [0, c4); p holds mean,
// scale, shift, A, B and C interleaved by channel groups.
//
//go:noescape
func normActGradAVX2(x, dy, dx *float32, rows, c, c4 int, p *float32, slope float32)
