package onnx

import (
	"errors"
	"fmt"
	"math"
)

// Unmarshal decodes an .onnx file's bytes. It is a minimal reader for the
// subset of ONNX that Model represents (what this package writes): a
// field outside it (a sub-graph, external data, sparse tensors, …) is an
// error naming the message, the field and its byte offset rather than
// something silently dropped, so Unmarshal(b) succeeding means Model
// holds everything b says.
func Unmarshal(b []byte) (*Model, error) {
	m := &Model{}
	err := fields(&decoder{b: b}, "ModelProto", func(f field) error {
		var err error
		switch f.num {
		case 1:
			m.IRVersion, err = f.int64("ModelProto", "ir_version")
		case 2:
			m.ProducerName, err = f.string("ModelProto", "producer_name")
		case 3:
			m.ProducerVersion, err = f.string("ModelProto", "producer_version")
		case 6:
			m.DocString, err = f.string("ModelProto", "doc_string")
		case 7:
			if err = f.want(wireLen, "ModelProto", "graph"); err == nil {
				err = m.Graph.unmarshal(f.sub())
			}
		case 8:
			var o OpsetID
			if err = f.want(wireLen, "ModelProto", "opset_import"); err == nil {
				err = o.unmarshal(f.sub())
			}
			m.OpsetImports = append(m.OpsetImports, o)
		case 14:
			var p Property
			if err = f.want(wireLen, "ModelProto", "metadata_props"); err == nil {
				err = p.unmarshal(f.sub())
			}
			m.Metadata = append(m.Metadata, p)
		default:
			return errUnsupported
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

var errUnsupported = errors.New("not supported by this reader")

// fields calls fn for each field of the message d holds; fn returns
// errUnsupported for a field it does not know.
func fields(d *decoder, msg string, fn func(field) error) error {
	for {
		f, ok, err := d.next()
		if err != nil {
			return fmt.Errorf("%s: %w", msg, err)
		}
		if !ok {
			return nil
		}
		if err := fn(f); err != nil {
			if errors.Is(err, errUnsupported) {
				return fmt.Errorf("%s field %d (byte %d): %w", msg, f.num, f.at, err)
			}
			return err
		}
	}
}

func (f field) int64(msg, name string) (int64, error) {
	if err := f.want(wireVarint, msg, name); err != nil {
		return 0, err
	}
	return int64(f.u), nil
}

func (f field) string(msg, name string) (string, error) {
	if err := f.want(wireLen, msg, name); err != nil {
		return "", err
	}
	return string(f.b), nil
}

func (o *OpsetID) unmarshal(d *decoder) error {
	return fields(d, "OperatorSetIdProto", func(f field) (err error) {
		switch f.num {
		case 1:
			o.Domain, err = f.string("OperatorSetIdProto", "domain")
		case 2:
			o.Version, err = f.int64("OperatorSetIdProto", "version")
		default:
			return errUnsupported
		}
		return err
	})
}

func (p *Property) unmarshal(d *decoder) error {
	return fields(d, "StringStringEntryProto", func(f field) (err error) {
		switch f.num {
		case 1:
			p.Key, err = f.string("StringStringEntryProto", "key")
		case 2:
			p.Value, err = f.string("StringStringEntryProto", "value")
		default:
			return errUnsupported
		}
		return err
	})
}

func (g *Graph) unmarshal(d *decoder) error {
	const msg = "GraphProto"
	return fields(d, msg, func(f field) (err error) {
		switch f.num {
		case 1:
			var n Node
			if err = f.want(wireLen, msg, "node"); err == nil {
				err = n.unmarshal(f.sub())
			}
			g.Nodes = append(g.Nodes, n)
		case 2:
			g.Name, err = f.string(msg, "name")
		case 5:
			var t Tensor
			if err = f.want(wireLen, msg, "initializer"); err == nil {
				err = t.unmarshal(f.sub())
			}
			g.Initializers = append(g.Initializers, t)
		case 10:
			g.DocString, err = f.string(msg, "doc_string")
		case 11, 12:
			var v ValueInfo
			if err = f.want(wireLen, msg, "input/output"); err == nil {
				err = v.unmarshal(f.sub())
			}
			if f.num == 11 {
				g.Inputs = append(g.Inputs, v)
			} else {
				g.Outputs = append(g.Outputs, v)
			}
		default:
			return errUnsupported
		}
		return err
	})
}

func (n *Node) unmarshal(d *decoder) error {
	const msg = "NodeProto"
	return fields(d, msg, func(f field) (err error) {
		var s string
		switch f.num {
		case 1:
			s, err = f.string(msg, "input")
			n.Inputs = append(n.Inputs, s)
		case 2:
			s, err = f.string(msg, "output")
			n.Outputs = append(n.Outputs, s)
		case 3:
			n.Name, err = f.string(msg, "name")
		case 4:
			n.OpType, err = f.string(msg, "op_type")
		case 5:
			var a Attribute
			if err = f.want(wireLen, msg, "attribute"); err == nil {
				err = a.unmarshal(f.sub())
			}
			n.Attrs = append(n.Attrs, a)
		case 7:
			n.Domain, err = f.string(msg, "domain")
		default:
			return errUnsupported
		}
		return err
	})
}

func (a *Attribute) unmarshal(d *decoder) error {
	const msg = "AttributeProto"
	var seen AttrType // the value field present, to check against type
	err := fields(d, msg, func(f field) (err error) {
		switch f.num {
		case 1:
			a.Name, err = f.string(msg, "name")
		case 2:
			if err = f.want(wireI32, msg, "f"); err == nil {
				a.F, seen = math.Float32frombits(uint32(f.u)), AttrFloat
			}
		case 3:
			a.I, err = f.int64(msg, "i")
			seen = AttrInt
		case 4:
			a.S, err = f.string(msg, "s")
			seen = AttrString
		case 7:
			var vs []float32
			vs, err = f.float32s()
			a.Floats, seen = append(a.Floats, vs...), AttrFloats
		case 8:
			var vs []int64
			vs, err = f.int64s()
			a.Ints, seen = append(a.Ints, vs...), AttrInts
		case 20:
			var t int64
			t, err = f.int64(msg, "type")
			a.Type = AttrType(t)
		default:
			return errUnsupported
		}
		return err
	})
	if err != nil {
		return err
	}
	// An empty list has no value field; any other attribute must hold the
	// value its type names.
	if seen != a.Type && (seen != 0 || (a.Type != AttrFloats && a.Type != AttrInts)) {
		return fmt.Errorf("attribute %q: type %d, value field of type %d", a.Name, a.Type, seen)
	}
	return nil
}

func (t *Tensor) unmarshal(d *decoder) error {
	const msg = "TensorProto"
	return fields(d, msg, func(f field) (err error) {
		switch f.num {
		case 1:
			var vs []int64
			vs, err = f.int64s()
			t.Dims = append(t.Dims, vs...)
		case 2:
			var v int64
			v, err = f.int64(msg, "data_type")
			t.DataType = DataType(v)
		case 8:
			t.Name, err = f.string(msg, "name")
		case 9:
			if err = f.want(wireLen, msg, "raw_data"); err == nil {
				t.Raw = append([]byte(nil), f.b...)
			}
		default:
			return errUnsupported
		}
		return err
	})
}

func (v *ValueInfo) unmarshal(d *decoder) error {
	return fields(d, "ValueInfoProto", func(f field) (err error) {
		switch f.num {
		case 1:
			v.Name, err = f.string("ValueInfoProto", "name")
		case 2:
			if err = f.want(wireLen, "ValueInfoProto", "type"); err == nil {
				err = v.unmarshalType(f.sub())
			}
		default:
			return errUnsupported
		}
		return err
	})
}

// unmarshalType reads a TypeProto, which must be a tensor type.
func (v *ValueInfo) unmarshalType(d *decoder) error {
	return fields(d, "TypeProto", func(f field) error {
		if f.num != 1 {
			return errUnsupported // sequence, map, … types
		}
		if err := f.want(wireLen, "TypeProto", "tensor_type"); err != nil {
			return err
		}
		return fields(f.sub(), "TypeProto.Tensor", func(f field) (err error) {
			switch f.num {
			case 1:
				var t int64
				t, err = f.int64("TypeProto.Tensor", "elem_type")
				v.ElemType = DataType(t)
			case 2:
				if err = f.want(wireLen, "TypeProto.Tensor", "shape"); err == nil {
					err = v.unmarshalShape(f.sub())
				}
			default:
				return errUnsupported
			}
			return err
		})
	})
}

func (v *ValueInfo) unmarshalShape(d *decoder) error {
	return fields(d, "TensorShapeProto", func(f field) error {
		if f.num != 1 {
			return errUnsupported
		}
		if err := f.want(wireLen, "TensorShapeProto", "dim"); err != nil {
			return err
		}
		var dim Dim
		err := fields(f.sub(), "TensorShapeProto.Dimension", func(f field) (err error) {
			switch f.num {
			case 1:
				dim.Value, err = f.int64("TensorShapeProto.Dimension", "dim_value")
			case 2:
				dim.Param, err = f.string("TensorShapeProto.Dimension", "dim_param")
			default:
				return errUnsupported // denotation
			}
			return err
		})
		v.Shape = append(v.Shape, dim)
		return err
	})
}
