package torchpt

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
)

// read reads a fixture with Read.
func read(t *testing.T, name string) ([]safetensors.Tensor, error) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return Read(bytes.NewReader(b), int64(len(b)), name)
}

// TestStateDict: every tensor of a state_dict torch.save wrote (PyTorch
// 2.15: make_fixtures.py), in the file's order, with the shape, dtype and
// values numpy reads — float16/bfloat16/float64/int64/bool, a 0-d and an
// empty tensor, a transposed view made contiguous, two views of one
// storage at their offsets.
func TestStateDict(t *testing.T) {
	var want struct {
		Tensors map[string]struct {
			Shape  []int
			DType  string
			Values []float64
		}
	}
	b, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	ts, err := read(t, "state_dict.pt")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range ts {
		names = append(names, x.Name)
	}
	order := []string{"conv.weight", "conv.bias", "half", "bf16", "double", "bn.num_batches_tracked", "mask", "scalar", "empty", "transposed", "view.a", "view.b"}
	if !slices.Equal(names, order) {
		t.Fatalf("tensors %v, want %v", names, order)
	}
	dtypes := map[string]safetensors.DType{"float32": safetensors.F32, "float16": safetensors.F16, "bfloat16": safetensors.BF16,
		"float64": safetensors.F64, "int64": safetensors.I64, "bool": safetensors.BOOL}
	var st bytes.Buffer
	if _, err := safetensors.Write(&st, ts, nil); err != nil {
		t.Fatal(err)
	}
	r, err := safetensors.Parse(bytes.NewReader(st.Bytes()), int64(st.Len()), "converted")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		w := want.Tensors[x.Name]
		if !slices.Equal(x.Shape, w.Shape) || x.DType != dtypes[w.DType] {
			t.Errorf("%s: shape %v dtype %s, want %v %s", x.Name, x.Shape, x.DType, w.Shape, w.DType)
			continue
		}
		var got []float64
		switch x.DType {
		case safetensors.I64:
			v := make([]int64, len(w.Values))
			if err := r.ReadInt64(x.Name, v); err != nil {
				t.Fatal(err)
			}
			for _, n := range v {
				got = append(got, float64(n))
			}
		case safetensors.BOOL:
			for _, c := range x.Data {
				got = append(got, float64(c))
			}
		default:
			v := make([]float32, len(w.Values))
			if err := r.ReadFloat32(x.Name, v); err != nil {
				t.Fatal(err)
			}
			for _, f := range v {
				got = append(got, float64(f))
			}
		}
		if len(got) != len(w.Values) {
			t.Errorf("%s: %d values, want %d", x.Name, len(got), len(w.Values))
			continue
		}
		for i := range got {
			// float64 values were written exactly; the float32 reading of
			// them rounds once.
			if d := math.Abs(got[i] - w.Values[i]); d > 1e-7*math.Max(1, math.Abs(w.Values[i])) {
				t.Errorf("%s[%d] = %v, want %v", x.Name, i, got[i], w.Values[i])
				break
			}
		}
	}
}

// TestCheckpointDict: a checkpoint dict shaped like nnU-Net's
// checkpoint_final.pth (numpy scalars, a torch.device, bytes, a set and a
// tuple around the weights) gives network_weights' tensors.
func TestCheckpointDict(t *testing.T) {
	ts, err := read(t, "checkpoint.pth")
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != "conv.weight" || ts[1].Name != "conv.bias" || !slices.Equal(ts[0].Shape, []int{2, 3, 3, 3, 3}) {
		t.Errorf("checkpoint.pth: %d tensors %v", len(ts), ts)
	}
	raw, err := os.ReadFile("testdata/checkpoint.pth")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(bytes.NewReader(raw), int64(len(raw)), "checkpoint.pth")
	if err != nil {
		t.Fatal(err)
	}
	if f.Numbers["current_epoch"] != 5 || len(f.Numbers) != 1 {
		t.Errorf("numbers %v, want current_epoch 5 alone", f.Numbers)
	}
	want, err := read(t, "state_dict.pt")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ts[0].Data, want[0].Data) {
		t.Error("checkpoint.pth's conv.weight differs from state_dict.pt's")
	}
}

// TestRefused: what is not a state_dict is refused, saying what it is.
func TestRefused(t *testing.T) {
	for name, msg := range map[string]string{
		"model.pt":  "holds a Python object of class torch.nn.modules.linear.Linear, not a state_dict (save model.state_dict(), not the model)",
		"tensor.pt": "holds one tensor, not a state_dict",
		"legacy.pt": "a legacy torch.save file",
	} {
		if _, err := read(t, name); err == nil || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want %q", name, err, msg)
		}
	}
	if _, err := Read(bytes.NewReader([]byte("nothing")), 7, "x.pt"); err == nil || !strings.Contains(err.Error(), "x.pt: not a torch.save file") {
		t.Errorf("not a zip: %v", err)
	}
}

// TestDamaged: every truncation and many byte flips of a real file give
// an error or a result, never a panic (the fuzz target goes further).
func TestDamaged(t *testing.T) {
	b, err := os.ReadFile("testdata/state_dict.pt")
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n += 7 {
		Read(bytes.NewReader(b[:n]), int64(n), "cut.pt")
	}
	for i := 0; i < len(b); i += 3 {
		c := slices.Clone(b)
		c[i] ^= 0x5a
		Read(bytes.NewReader(c), int64(len(c)), "flipped.pt")
	}
}

// TestPickleMachine: data.pkl's values the machine builds from hand-made
// pickles, and its errors on malformed ones.
func TestPickleMachine(t *testing.T) {
	// {'a': [1, -2, 3.5, True, None, 'x'], 'b': (2**70,)} in protocol 2.
	p := []byte("\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01J\xfe\xff\xff\xffG@\x0c\x00\x00\x00\x00\x00\x00\x88NX\x01\x00\x00\x00xeX\x01\x00\x00\x00b\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x40\x85u.")
	v, err := unpickle(p)
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*dict)
	a, _ := d.get("a")
	items := a.(*list).items
	if len(items) != 6 || items[0] != int64(1) || items[1] != int64(-2) || items[2] != 3.5 || items[3] != true || items[4] != nil || items[5] != "x" {
		t.Errorf("a = %#v", items)
	}
	bv, _ := d.get("b")
	if s := bv.(tuple)[0].(interface{ String() string }).String(); s != "1180591620717411303424" {
		t.Errorf("b = %v", s)
	}
	for _, bad := range []string{"", "\x80\x02", "\x80\x02.", "\x80\x02(.", "\x80\x02h\x05.", "\x80\x02\xff.", "\x80\x02X\xff\xff\xff\x7f", "\x80\x02u.", "\x80\x02K\x01K\x02s."} {
		if _, err := unpickle([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
