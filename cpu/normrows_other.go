//go:build !amd64 || purego

package cpu

// haveNormAsm is false: this build has no assembly norm loops.
const haveNormAsm = false

// The assembly loops are never called in this build; they exist so the
// dispatchers compile.
func normSumsAVX2(x *float32, rows, c, c4 int, s, q *float64) { panic("cpu: no norm assembly") }
func normActAVX2(x, y *float32, rows, c, c4 int, p *float32, slope float32) {
	panic("cpu: no norm assembly")
}
func normActGradSumsAVX2(x, dy *float32, rows, c, c4 int, p *float32, slope float32, sg, sgx *float64) {
	panic("cpu: no norm assembly")
}
func normActGradAVX2(x, dy, dx *float32, rows, c, c4 int, p *float32, slope float32) {
	panic("cpu: no norm assembly")
}
