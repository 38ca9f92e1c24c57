//go:build !amd64 || purego

package kern

// haveAsm is false: this build has no assembly micro-kernel.
const haveAsm = false

// ukernAsm is never called in this build; it exists so the dispatch compiles.
func ukernAsm(p *ukArgs) { ukernGo(p) }
