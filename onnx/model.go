package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DataType is TensorProto.DataType: an element type.
type DataType int32

// The element types this package writes.
const (
	Float DataType = 1 // float32
	Int64 DataType = 7
)

// AttrType is AttributeProto.AttributeType: which value an attribute holds.
type AttrType int32

// The attribute types this package writes.
const (
	AttrFloat  AttrType = 1
	AttrInt    AttrType = 2
	AttrString AttrType = 3
	AttrFloats AttrType = 6
	AttrInts   AttrType = 7
)

// Model is an ONNX ModelProto, limited to the fields an inference graph of
// plain operators needs.
type Model struct {
	// IRVersion is the ONNX IR version (8 goes with opset 17).
	IRVersion       int64
	ProducerName    string
	ProducerVersion string
	DocString       string
	Graph           Graph
	// OpsetImports are the operator sets the graph uses ("" is the
	// default ai.onnx domain).
	OpsetImports []OpsetID
	// Metadata are free key/value pairs (metadata_props).
	Metadata []Property
}

// OpsetID is an OperatorSetIdProto.
type OpsetID struct {
	Domain  string
	Version int64
}

// Property is a StringStringEntryProto.
type Property struct{ Key, Value string }

// Graph is a GraphProto: nodes in topological order, the constant
// tensors (initializers) and the typed inputs and outputs.
type Graph struct {
	Nodes        []Node
	Name         string
	Initializers []Tensor
	DocString    string
	Inputs       []ValueInfo
	Outputs      []ValueInfo
}

// Node is a NodeProto: one operator applied to named values.
type Node struct {
	Inputs  []string
	Outputs []string
	Name    string
	OpType  string
	Attrs   []Attribute
	Domain  string
}

// Attribute is an AttributeProto of one of the types in AttrType.
type Attribute struct {
	Name   string
	Type   AttrType
	F      float32
	I      int64
	S      string
	Floats []float32
	Ints   []int64
}

// Tensor is a TensorProto holding its elements as raw little-endian bytes
// (raw_data), the compact form ONNX files use for weights.
type Tensor struct {
	Dims     []int64
	DataType DataType
	Name     string
	Raw      []byte
}

// ValueInfo is a ValueInfoProto of a tensor type: a named value's element
// type and shape.
type ValueInfo struct {
	Name     string
	ElemType DataType
	Shape    []Dim
}

// Dim is one dimension of a shape: a fixed Value, or a symbolic Param
// (a dynamic size, e.g. "N") when Param is not empty.
type Dim struct {
	Value int64
	Param string
}

// FloatTensor returns a float32 tensor named name of shape dims holding
// data in row-major order.
func FloatTensor(name string, dims []int64, data []float32) Tensor {
	raw := make([]byte, 0, 4*len(data))
	for _, v := range data {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
	}
	return Tensor{Dims: append([]int64(nil), dims...), DataType: Float, Name: name, Raw: raw}
}

// Float32s returns a float32 tensor's elements, checking that their
// number agrees with the dimensions.
func (t *Tensor) Float32s() ([]float32, error) {
	if t.DataType != Float {
		return nil, fmt.Errorf("tensor %q: data type %d, want float (%d)", t.Name, t.DataType, Float)
	}
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	if int64(len(t.Raw)) != 4*n {
		return nil, fmt.Errorf("tensor %q: %d raw bytes for dims %v (%d floats)", t.Name, len(t.Raw), t.Dims, n)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Raw[4*i:]))
	}
	return out, nil
}

// Marshal encodes the model as an .onnx file's bytes. Fields are written
// in field number order and proto2's repeated scalars unpacked, as
// protobuf's serialisers do, so onnx.load(...).SerializeToString() gives
// the same bytes back.
func (m *Model) Marshal() []byte {
	var e encoder
	m.marshal(&e)
	return e.b
}

// Field numbers are onnx.proto's (github.com/onnx/onnx, onnx/onnx.proto).

func (m *Model) marshal(e *encoder) {
	e.int64(1, m.IRVersion)
	e.optString(2, m.ProducerName)
	e.optString(3, m.ProducerVersion)
	e.optString(6, m.DocString)
	e.message(7, &m.Graph)
	for i := range m.OpsetImports {
		e.message(8, &m.OpsetImports[i])
	}
	for i := range m.Metadata {
		e.message(14, &m.Metadata[i])
	}
}

func (o *OpsetID) marshal(e *encoder) {
	e.optString(1, o.Domain)
	e.int64(2, o.Version)
}

func (p *Property) marshal(e *encoder) {
	e.string(1, p.Key)
	e.string(2, p.Value)
}

func (g *Graph) marshal(e *encoder) {
	for i := range g.Nodes {
		e.message(1, &g.Nodes[i])
	}
	e.optString(2, g.Name)
	for i := range g.Initializers {
		e.message(5, &g.Initializers[i])
	}
	e.optString(10, g.DocString)
	for i := range g.Inputs {
		e.message(11, &g.Inputs[i])
	}
	for i := range g.Outputs {
		e.message(12, &g.Outputs[i])
	}
}

func (n *Node) marshal(e *encoder) {
	for _, s := range n.Inputs {
		e.string(1, s)
	}
	for _, s := range n.Outputs {
		e.string(2, s)
	}
	e.optString(3, n.Name)
	e.string(4, n.OpType)
	for i := range n.Attrs {
		e.message(5, &n.Attrs[i])
	}
	e.optString(7, n.Domain)
}

func (a *Attribute) marshal(e *encoder) {
	e.string(1, a.Name)
	switch a.Type {
	case AttrFloat:
		e.float32(2, a.F)
	case AttrInt:
		e.int64(3, a.I)
	case AttrString:
		e.string(4, a.S)
	case AttrFloats:
		for _, v := range a.Floats {
			e.float32(7, v)
		}
	case AttrInts:
		for _, v := range a.Ints {
			e.int64(8, v)
		}
	}
	e.int64(20, int64(a.Type))
}

func (t *Tensor) marshal(e *encoder) {
	for _, d := range t.Dims {
		e.int64(1, d)
	}
	e.int64(2, int64(t.DataType))
	e.optString(8, t.Name)
	e.bytes(9, t.Raw)
}

func (v *ValueInfo) marshal(e *encoder) {
	e.string(1, v.Name)
	e.message(2, (*typeProto)(v))
}

// typeProto, tensorType and shapeProto encode a ValueInfo's TypeProto
// {tensor_type: {elem_type, shape: {dim...}}}.
type (
	typeProto  ValueInfo
	tensorType ValueInfo
	shapeProto ValueInfo
)

func (t *typeProto) marshal(e *encoder) { e.message(1, (*tensorType)(t)) }

func (t *tensorType) marshal(e *encoder) {
	e.int64(1, int64(t.ElemType))
	e.message(2, (*shapeProto)(t))
}

func (s *shapeProto) marshal(e *encoder) {
	for i := range s.Shape {
		e.message(1, &s.Shape[i])
	}
}

func (d *Dim) marshal(e *encoder) {
	if d.Param != "" {
		e.string(2, d.Param)
	} else {
		e.int64(1, d.Value)
	}
}
