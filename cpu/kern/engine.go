package kern

// Engine runs the fast kernels. The zero value is ready to use and runs on
// runtime.GOMAXPROCS(0) goroutines; set Threads to pin the count.
//
// TEMPORARY: until the optimised kernels land, the methods delegate to the
// reference implementations, so callers can be written against the final API.
type Engine struct {
	// Threads is the number of goroutines a kernel call may use; 0 means GOMAXPROCS.
	Threads int
}

// Conv3DForward computes y = conv(x, w) + bias (see Conv3DForwardRef). y is overwritten.
func (e *Engine) Conv3DForward(g ConvGeom, x, w, bias, y []float32) {
	Conv3DForwardRef(g, x, w, bias, y)
}

// Conv3DBackwardData computes dx from dy (see Conv3DBackwardDataRef). dx is overwritten.
func (e *Engine) Conv3DBackwardData(g ConvGeom, dy, w, dx []float32) {
	Conv3DBackwardDataRef(g, dy, w, dx)
}

// Conv3DBackwardWeight computes dw and, if dbias is not nil, dbias (see
// Conv3DBackwardWeightRef). Both are overwritten.
func (e *Engine) Conv3DBackwardWeight(g ConvGeom, x, dy, dw, dbias []float32) {
	Conv3DBackwardWeightRef(g, x, dy, dw, dbias)
}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C (see SgemmRef).
func (e *Engine) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	SgemmRef(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
