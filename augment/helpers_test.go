package augment

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"testing"

	"github.com/voxtrain/voxtrain/config"
)

func newDest(a *Augmenter, withLabel bool) Dest {
	p := a.Patch()
	n := p[0] * p[1] * p[2]
	d := Dest{Image: make([][]float32, a.Channels())}
	for c := range d.Image {
		d.Image[c] = make([]float32, n)
		for i := range d.Image[c] {
			d.Image[c][i] = float32(math.NaN())
		}
	}
	if withLabel {
		d.Label = make([]float32, n)
		for i := range d.Label {
			d.Label[i] = -1
		}
	}
	return d
}

func mustNew(t testing.TB, cfg config.Augment, patch [3]int, ch int) *Augmenter {
	t.Helper()
	a, err := New(cfg, patch, ch)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustPreset(t testing.TB, name string) config.Augment {
	t.Helper()
	c, err := config.AugmentPreset(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// crop extracts patch p at corner c from vol (shape s), border value outside.
func crop(vol []float32, s, c, p [3]int, border float32) []float32 {
	out := make([]float32, p[0]*p[1]*p[2])
	for z := 0; z < p[0]; z++ {
		for y := 0; y < p[1]; y++ {
			for x := 0; x < p[2]; x++ {
				sz, sy, sx := z+c[0], y+c[1], x+c[2]
				v := border
				if sz >= 0 && sz < s[0] && sy >= 0 && sy < s[1] && sx >= 0 && sx < s[2] {
					v = vol[(sz*s[1]+sy)*s[2]+sx]
				}
				out[(z*p[1]+y)*p[2]+x] = v
			}
		}
	}
	return out
}

func cropLabel(lab []uint8, s, c, p [3]int) []float32 {
	f := make([]float32, len(lab))
	for i, v := range lab {
		f[i] = float32(v)
	}
	return crop(f, s, c, p, 0)
}

func equalBits(a, b []float32) (int, bool) {
	if len(a) != len(b) {
		return -1, false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i, false
		}
	}
	return 0, true
}

func hashDest(d Dest) [32]byte {
	h := sha256.New()
	var b [4]byte
	for _, ch := range d.Image {
		for _, v := range ch {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			h.Write(b[:])
		}
	}
	for _, v := range d.Label {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		h.Write(b[:])
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// allOn is the nnU-Net preset with every transform (and elastic, rot90)
// applied to every sample and channel.
func allOn(t testing.TB) config.Augment {
	c := mustPreset(t, config.PresetNNUNet)
	c.Rotation.P, c.Scaling.P, c.Elastic.P, c.Rot90.P = 1, 1, 1, 1
	c.Noise.P, c.Blur.P, c.Blur.PPerChannel = 1, 1, 1
	c.Brightness.P, c.Contrast.P, c.LowRes.P, c.LowRes.PPerChannel = 1, 1, 1, 1
	c.GammaInverted.P, c.Gamma.P = 1, 1
	return c
}
