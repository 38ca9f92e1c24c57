package geom

import (
	"strings"
	"testing"
)

func TestOutputSize(t *testing.T) {
	for _, c := range []struct {
		name         string
		g            Conv
		outD, oH, oW int
	}{
		{"3×3×3 stride 1 pad 1 keeps the size", Conv{N: 2, InD: 5, InH: 6, InW: 7, InC: 3, OutC: 4, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}, 5, 6, 7},
		{"3×3×3 stride 2 pad 1 halves, rounding up", Conv{N: 1, InD: 6, InH: 7, InW: 8, InC: 2, OutC: 3, KD: 3, KH: 3, KW: 3, SD: 2, SH: 2, SW: 2, PD: 1, PH: 1, PW: 1}, 3, 4, 4},
		{"2×2×2 stride 2 halves, rounding down", Conv{N: 1, InD: 4, InH: 5, InW: 6, InC: 2, OutC: 3, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2}, 2, 2, 3},
		{"anisotropic 1×3×3 stride (1, 2, 2)", Conv{N: 2, InD: 4, InH: 6, InW: 6, InC: 3, OutC: 2, KD: 1, KH: 3, KW: 3, SD: 1, SH: 2, SW: 2, PH: 1, PW: 1}, 4, 3, 3},
	} {
		g := c.g
		if err := g.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if g.OutD() != c.outD || g.OutH() != c.oH || g.OutW() != c.oW {
			t.Errorf("%s: output (%d, %d, %d), want (%d, %d, %d)", c.name, g.OutD(), g.OutH(), g.OutW(), c.outD, c.oH, c.oW)
		}
		prod := func(s []int) int {
			p := 1
			for _, d := range s {
				p *= d
			}
			return p
		}
		if prod(g.InShape()) != g.InLen() || prod(g.OutShape()) != g.OutLen() || prod(g.WeightShape()) != g.WeightLen() {
			t.Errorf("%s: shapes %v %v %v disagree with lengths %d %d %d", c.name, g.InShape(), g.OutShape(), g.WeightShape(), g.InLen(), g.OutLen(), g.WeightLen())
		}
		if g.OutVoxels()*g.OutC != g.OutLen() || g.PatchLen()*g.OutC != g.WeightLen() {
			t.Errorf("%s: OutVoxels %d, PatchLen %d disagree with the lengths", c.name, g.OutVoxels(), g.PatchLen())
		}
		if want := int64(g.OutVoxels()) * int64(g.OutC) * int64(g.PatchLen()); g.MACs() != want {
			t.Errorf("%s: MACs %d, want %d", c.name, g.MACs(), want)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	ok := Conv{N: 1, InD: 4, InH: 4, InW: 4, InC: 1, OutC: 1, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid geometry rejected: %v", err)
	}
	for _, c := range []struct {
		name, want string
		edit       func(*Conv)
	}{
		{"zero batch", "sizes must be positive", func(g *Conv) { g.N = 0 }},
		{"zero output channels", "sizes must be positive", func(g *Conv) { g.OutC = 0 }},
		{"zero kernel", "kernel and stride must be positive", func(g *Conv) { g.KH = 0 }},
		{"zero stride", "kernel and stride must be positive", func(g *Conv) { g.SW = 0 }},
		{"negative padding", "padding must be non-negative", func(g *Conv) { g.PD = -1 }},
		{"kernel larger than the padded input", "kernel larger than padded input", func(g *Conv) { g.InW, g.KW, g.PW = 1, 5, 0 }},
	} {
		g := ok
		c.edit(&g)
		err := g.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
