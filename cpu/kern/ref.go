package kern

import "github.com/voxtrain/voxtrain/internal/geom"

// Conv3DForwardRef is the reference convolution:
//
//	y[n,od,oh,ow,co] = bias[co] + Σ_{kd,kh,kw,ci} x[n, od*SD-PD+kd, oh*SH-PH+kh, ow*SW-PW+kw, ci] · w[co,kd,kh,kw,ci]
//
// with out-of-range input voxels read as zero. bias may be nil. y is overwritten.
// Accumulation is in float64 so the reference is a tight bound for the fast kernels.
func Conv3DForwardRef(g geom.Conv, x, w, bias, y []float32) {
	oD, oH, oW := g.OutD(), g.OutH(), g.OutW()
	for n := 0; n < g.N; n++ {
		for od := 0; od < oD; od++ {
			for oh := 0; oh < oH; oh++ {
				for ow := 0; ow < oW; ow++ {
					for co := 0; co < g.OutC; co++ {
						var s float64
						if bias != nil {
							s = float64(bias[co])
						}
						for kd := 0; kd < g.KD; kd++ {
							id := od*g.SD - g.PD + kd
							if id < 0 || id >= g.InD {
								continue
							}
							for kh := 0; kh < g.KH; kh++ {
								ih := oh*g.SH - g.PH + kh
								if ih < 0 || ih >= g.InH {
									continue
								}
								for kw := 0; kw < g.KW; kw++ {
									iw := ow*g.SW - g.PW + kw
									if iw < 0 || iw >= g.InW {
										continue
									}
									xo := (((n*g.InD+id)*g.InH+ih)*g.InW + iw) * g.InC
									wo := (((co*g.KD+kd)*g.KH+kh)*g.KW + kw) * g.InC
									for ci := 0; ci < g.InC; ci++ {
										s += float64(x[xo+ci]) * float64(w[wo+ci])
									}
								}
							}
						}
						y[(((n*oD+od)*oH+oh)*oW+ow)*g.OutC+co] = float32(s)
					}
				}
			}
		}
	}
}

// Conv3DBackwardDataRef computes dx = ∂L/∂x given dy = ∂L/∂y for the
// convolution of Conv3DForwardRef. dx is overwritten.
func Conv3DBackwardDataRef(g geom.Conv, dy, w, dx []float32) {
	acc := make([]float64, g.InLen())
	oD, oH, oW := g.OutD(), g.OutH(), g.OutW()
	for n := 0; n < g.N; n++ {
		for od := 0; od < oD; od++ {
			for oh := 0; oh < oH; oh++ {
				for ow := 0; ow < oW; ow++ {
					for co := 0; co < g.OutC; co++ {
						gy := float64(dy[(((n*oD+od)*oH+oh)*oW+ow)*g.OutC+co])
						if gy == 0 {
							continue
						}
						for kd := 0; kd < g.KD; kd++ {
							id := od*g.SD - g.PD + kd
							if id < 0 || id >= g.InD {
								continue
							}
							for kh := 0; kh < g.KH; kh++ {
								ih := oh*g.SH - g.PH + kh
								if ih < 0 || ih >= g.InH {
									continue
								}
								for kw := 0; kw < g.KW; kw++ {
									iw := ow*g.SW - g.PW + kw
									if iw < 0 || iw >= g.InW {
										continue
									}
									xo := (((n*g.InD+id)*g.InH+ih)*g.InW + iw) * g.InC
									wo := (((co*g.KD+kd)*g.KH+kh)*g.KW + kw) * g.InC
									for ci := 0; ci < g.InC; ci++ {
										acc[xo+ci] += gy * float64(w[wo+ci])
									}
								}
							}
						}
					}
				}
			}
		}
	}
	for i, v := range acc {
		dx[i] = float32(v)
	}
}

// Conv3DBackwardWeightRef computes dw = ∂L/∂w and, when dbias is not nil,
// dbias = ∂L/∂bias for the convolution of Conv3DForwardRef. Both are
// overwritten.
func Conv3DBackwardWeightRef(g geom.Conv, x, dy, dw, dbias []float32) {
	acc := make([]float64, g.WeightLen())
	accB := make([]float64, g.OutC)
	oD, oH, oW := g.OutD(), g.OutH(), g.OutW()
	for n := 0; n < g.N; n++ {
		for od := 0; od < oD; od++ {
			for oh := 0; oh < oH; oh++ {
				for ow := 0; ow < oW; ow++ {
					for co := 0; co < g.OutC; co++ {
						gy := float64(dy[(((n*oD+od)*oH+oh)*oW+ow)*g.OutC+co])
						accB[co] += gy
						for kd := 0; kd < g.KD; kd++ {
							id := od*g.SD - g.PD + kd
							if id < 0 || id >= g.InD {
								continue
							}
							for kh := 0; kh < g.KH; kh++ {
								ih := oh*g.SH - g.PH + kh
								if ih < 0 || ih >= g.InH {
									continue
								}
								for kw := 0; kw < g.KW; kw++ {
									iw := ow*g.SW - g.PW + kw
									if iw < 0 || iw >= g.InW {
										continue
									}
									xo := (((n*g.InD+id)*g.InH+ih)*g.InW + iw) * g.InC
									wo := (((co*g.KD+kd)*g.KH+kh)*g.KW + kw) * g.InC
									for ci := 0; ci < g.InC; ci++ {
										acc[wo+ci] += gy * float64(x[xo+ci])
									}
								}
							}
						}
					}
				}
			}
		}
	}
	for i, v := range acc {
		dw[i] = float32(v)
	}
	if dbias != nil {
		for i, v := range accB {
			dbias[i] = float32(v)
		}
	}
}

// SgemmRef computes C = alpha·op(A)·op(B) + beta·C for row-major matrices,
// where op(X) is X or its transpose. op(A) is m×k, op(B) is k×n, C is m×n;
// lda, ldb, ldc are the row strides of A, B and C as stored.
func SgemmRef(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			if beta == 0 {
				c[i*ldc+j] = alpha * float32(s)
			} else {
				c[i*ldc+j] = alpha*float32(s) + beta*c[i*ldc+j]
			}
		}
	}
}
