package onnx

import "fmt"

// Check reports the first structural problem of the model, as a quick
// stand-in for onnx.checker where Python is not at hand: an IR version
// and a default-domain opset must be given; value names must be defined
// once (graph inputs, initializers, node outputs) and before they are
// used, in node order; graph outputs must be defined; float initializers
// must hold as many values as their dimensions say. It does not check
// operator semantics (attributes, shapes), which is onnxruntime's part in
// the tests.
func (m *Model) Check() error {
	if m.IRVersion < 3 {
		return fmt.Errorf("ir_version %d: want >= 3 (opset imports)", m.IRVersion)
	}
	hasDefault := false
	for _, o := range m.OpsetImports {
		if o.Domain == "" || o.Domain == "ai.onnx" {
			hasDefault = true
		}
	}
	if !hasDefault {
		return fmt.Errorf("no opset_import for the default domain (ai.onnx)")
	}
	g := &m.Graph
	defined := map[string]string{} // value name → what defines it
	define := func(name, by string) error {
		if name == "" {
			return fmt.Errorf("%s: empty value name", by)
		}
		if prev, dup := defined[name]; dup {
			return fmt.Errorf("value %q defined twice: by %s and by %s", name, prev, by)
		}
		defined[name] = by
		return nil
	}
	for _, v := range g.Inputs {
		if err := define(v.Name, "a graph input"); err != nil {
			return err
		}
	}
	for i := range g.Initializers {
		t := &g.Initializers[i]
		if err := define(t.Name, "an initializer"); err != nil {
			return err
		}
		if t.DataType == Float {
			if _, err := t.Float32s(); err != nil {
				return err
			}
		}
	}
	for i, n := range g.Nodes {
		by := fmt.Sprintf("node %d (%s %q)", i, n.OpType, n.Name)
		if n.OpType == "" {
			return fmt.Errorf("%s: no op_type", by)
		}
		for _, in := range n.Inputs {
			// "" is an optional input left out.
			if _, ok := defined[in]; in != "" && !ok {
				return fmt.Errorf("%s: input %q is not defined before it", by, in)
			}
		}
		for _, out := range n.Outputs {
			if err := define(out, by); err != nil {
				return err
			}
		}
	}
	if len(g.Outputs) == 0 {
		return fmt.Errorf("graph %q has no outputs", g.Name)
	}
	for _, v := range g.Outputs {
		if _, ok := defined[v.Name]; !ok {
			return fmt.Errorf("graph output %q is not defined", v.Name)
		}
	}
	return nil
}
