package onnx

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The reader accepts packed repeated scalars, which Marshal does not write
// (proto2's repeated fields are unpacked); the tests write them with these.

// packedInt64s writes a repeated int64 field, packed.
func (e *encoder) packedInt64s(field int, vs []int64) {
	var sub []byte
	for _, v := range vs {
		sub = binary.AppendUvarint(sub, uint64(v))
	}
	e.bytes(field, sub)
}

// packedFloat32s writes a repeated float field, packed.
func (e *encoder) packedFloat32s(field int, vs []float32) {
	sub := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		sub = binary.LittleEndian.AppendUint32(sub, math.Float32bits(v))
	}
	e.bytes(field, sub)
}

// TestEncoderWire: the wire encoding of each kind of field, against the
// examples of protobuf's encoding guide and hand-derived bytes.
func TestEncoderWire(t *testing.T) {
	for _, c := range []struct {
		name string
		emit func(*encoder)
		want string
	}{
		{"varint 150 (the guide's example)", func(e *encoder) { e.int64(1, 150) }, "089601"},
		{"string (the guide's example)", func(e *encoder) { e.string(2, "testing") }, "120774657374696e67"},
		{"negative int64: ten bytes", func(e *encoder) { e.int64(3, -1) }, "18ffffffffffffffffff01"},
		{"float32 1.0: fixed 32 bits", func(e *encoder) { e.float32(2, 1) }, "150000803f"},
		{"field 20: a two-byte tag", func(e *encoder) { e.int64(20, 7) }, "a00107"},
		{"empty optional string left out", func(e *encoder) { e.optString(3, "") }, ""},
		{"packed int64s", func(e *encoder) { e.packedInt64s(4, []int64{3, 270}) }, "2203038e02"},
		{"packed floats", func(e *encoder) { e.packedFloat32s(4, []float32{1, -2}) }, "22080000803f000000c0"},
		{"dim_param, not dim_value", func(e *encoder) { e.message(1, &Dim{Param: "N"}) }, "0a03" + "12014e"},
	} {
		var e encoder
		c.emit(&e)
		if got := hex.EncodeToString(e.b); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// sampleModel uses every field and attribute type Model has.
func sampleModel() *Model {
	return &Model{
		IRVersion: 8, ProducerName: "p", ProducerVersion: "1", DocString: "d",
		OpsetImports: []OpsetID{{Version: 17}, {Domain: "com.example", Version: 1}},
		Metadata:     []Property{{"k", "v"}, {"empty", ""}},
		Graph: Graph{
			Name: "g", DocString: "gd",
			Inputs:  []ValueInfo{{Name: "x", ElemType: Float, Shape: []Dim{{Param: "N"}, {Value: 3}}}},
			Outputs: []ValueInfo{{Name: "y", ElemType: Float, Shape: []Dim{{Param: "N"}, {Value: 0}}}},
			Initializers: []Tensor{
				FloatTensor("w", []int64{3, 2}, []float32{1, -2, 3.5, 0, -0.25, 1e-30}),
				FloatTensor("s", nil, []float32{7}),
			},
			Nodes: []Node{
				{Inputs: []string{"x", "w"}, Outputs: []string{"h"}, Name: "mm", OpType: "MatMul"},
				{Inputs: []string{"h", "", "s"}, Outputs: []string{"y"}, OpType: "Custom", Domain: "com.example", Attrs: []Attribute{
					{Name: "f", Type: AttrFloat, F: -0.5},
					{Name: "i", Type: AttrInt, I: -3},
					{Name: "s", Type: AttrString, S: "str"},
					{Name: "fs", Type: AttrFloats, Floats: []float32{1, 2}},
					{Name: "is", Type: AttrInts, Ints: []int64{0, -1, 1 << 40}},
					{Name: "none", Type: AttrInts},
				}},
			},
		},
	}
}

// TestRoundTrip: Unmarshal(Marshal(m)) is m, field for field, and the
// model passes Check.
func TestRoundTrip(t *testing.T) {
	m := sampleModel()
	b := m.Marshal()
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
	}
	if err := got.Check(); err != nil {
		t.Error(err)
	}
	if !bytes.Equal(got.Marshal(), b) {
		t.Error("re-encoding changes the bytes")
	}
	w, _ := got.Graph.Initializers[0].Float32s()
	if !reflect.DeepEqual(w, []float32{1, -2, 3.5, 0, -0.25, 1e-30}) {
		t.Errorf("initializer values %v", w)
	}
}

// TestUnmarshalAcceptsPacked: repeated scalars are read packed as well as
// unpacked (protobuf parsers must accept both).
func TestUnmarshalAcceptsPacked(t *testing.T) {
	var attr encoder
	attr.string(1, "is")
	attr.packedInt64s(8, []int64{1, 2})
	attr.int64(8, 3)
	attr.int64(20, int64(AttrInts))
	var fattr encoder
	fattr.string(1, "fs")
	fattr.packedFloat32s(7, []float32{0.5, -1})
	fattr.int64(20, int64(AttrFloats))
	var node encoder
	node.string(4, "Op")
	node.bytes(5, attr.b)
	node.bytes(5, fattr.b)
	var graph encoder
	graph.bytes(1, node.b)
	var model encoder
	model.bytes(7, graph.b)
	m, err := Unmarshal(model.b)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Graph.Nodes[0].Attrs[0].Ints; !reflect.DeepEqual(got, []int64{1, 2, 3}) {
		t.Errorf("ints %v", got)
	}
	if got := m.Graph.Nodes[0].Attrs[1].Floats; !reflect.DeepEqual(got, []float32{0.5, -1}) {
		t.Errorf("floats %v", got)
	}
}

// TestUnmarshalErrors: damaged bytes and fields outside the subset are
// errors that say where.
func TestUnmarshalErrors(t *testing.T) {
	good := sampleModel().Marshal()
	golden, err := os.ReadFile("testdata/unet_small.onnx")
	if err != nil {
		t.Fatal(err)
	}
	withField := func(b []byte, emit func(*encoder)) []byte {
		var e encoder
		emit(&e)
		return append(append([]byte(nil), b...), e.b...)
	}
	var badAttr encoder
	badAttr.string(1, "a")
	badAttr.int64(3, 1)
	badAttr.int64(20, int64(AttrFloat))
	var badNode encoder
	badNode.bytes(5, badAttr.b)
	var badGraph encoder
	badGraph.bytes(1, badNode.b)
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"cut inside the graph", golden[:len(golden)/2], "past the end"},
		{"cut inside a varint", append(append([]byte(nil), good...), 0x08, 0x80), "truncated"},
		{"unknown model field", withField(good, func(e *encoder) { e.int64(20, 1) }), "ModelProto field 20"},
		{"group wire type", withField(good, func(e *encoder) { e.tag(9, 3) }), "wire type 3"},
		{"string as varint", withField(good, func(e *encoder) { e.int64(2, 1) }), "ModelProto.producer_name (field 2): wire type 0"},
		{"field number 0", []byte{0x00, 0x01}, "field number 0"},
		{"attribute type and value disagree", withField(good, func(e *encoder) { e.bytes(7, badGraph.b) }), `attribute "a": type 1`},
		{"external data", withField(good, func(e *encoder) {
			var tensor encoder
			tensor.bytes(13, []byte{})
			var g encoder
			g.bytes(5, tensor.b)
			e.bytes(7, g.b)
		}), "TensorProto field 13"},
	} {
		_, err := Unmarshal(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

// TestCheck: each structural rule Check enforces.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Model)
		want string
	}{
		{"no default opset", func(m *Model) { m.OpsetImports = m.OpsetImports[1:] }, "default domain"},
		{"old IR", func(m *Model) { m.IRVersion = 2 }, "ir_version 2"},
		{"input used before it is made", func(m *Model) { m.Graph.Nodes[0], m.Graph.Nodes[1] = m.Graph.Nodes[1], m.Graph.Nodes[0] }, `input "h" is not defined`},
		{"output defined twice", func(m *Model) { m.Graph.Nodes[1].Outputs[0] = "h" }, `value "h" defined twice`},
		{"initializer shadowing an input", func(m *Model) { m.Graph.Initializers[1].Name = "x" }, `value "x" defined twice`},
		{"undefined graph output", func(m *Model) { m.Graph.Outputs[0].Name = "z" }, `graph output "z"`},
		{"no op_type", func(m *Model) { m.Graph.Nodes[0].OpType = "" }, "no op_type"},
		{"short initializer", func(m *Model) { m.Graph.Initializers[0].Raw = m.Graph.Initializers[0].Raw[4:] }, `tensor "w": 20 raw bytes`},
	} {
		m := sampleModel()
		c.edit(m)
		if err := m.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
}
