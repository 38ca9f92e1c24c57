//go:build amd64 && !purego

package kern

import "golang.org/x/sys/cpu"

// haveAsm reports whether the AVX2+FMA micro-kernel can run on this CPU.
var haveAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// ukernAsm is the AVX2+FMA micro-kernel (ukern_amd64.s); same contract as ukernGo.
//
//go:noescape
func ukernAsm(p *ukArgs)
