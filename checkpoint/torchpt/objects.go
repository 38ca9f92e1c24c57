package torchpt

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
)

// The values the pickle machine builds (see pickle.go) and the calls of
// the few functions torch.save writes: the persistent ids of storages,
// tensors rebuilt from them, parameters, OrderedDicts, protocol 2's bytes.
// Any other global called is kept as an *object of its name and arguments.

type (
	tuple  []any
	list   struct{ items []any }
	dict   struct{ keys, vals []any }
	global struct{ module, name string }
	// object is a call of a global the machine does not know, with the
	// state BUILD gave it.
	object struct {
		fn    global
		args  []any
		state any
	}
	// storage is a persistent id ('storage', type, key, location, numel).
	storage struct {
		dtype string
		key   string
		numel int64
	}
	// tensor is torch._utils._rebuild_tensor_v2's arguments.
	tensor struct {
		st     *storage
		offset int64
		shape  []int64
		stride []int64
	}
)

// get returns the value of a string key.
func (d *dict) get(key string) (any, bool) {
	for i, k := range d.keys {
		if s, ok := k.(string); ok && s == key {
			return d.vals[i], true
		}
	}
	return nil, false
}

// set sets key (replacing an equal string key).
func (d *dict) set(k, v any) {
	if s, ok := k.(string); ok {
		for i, old := range d.keys {
			if o, ok := old.(string); ok && o == s {
				d.vals[i] = v
				return
			}
		}
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
}

func appendTo(l, v any) error {
	switch t := l.(type) {
	case *list:
		t.items = append(t.items, v)
		return nil
	case *object:
		t.args = append(t.args, v) // an object built from a list (a set, a deque): its items
		return nil
	}
	return fmt.Errorf("APPEND to a %T", l)
}

func setItems(d any, items []any) error {
	if len(items)%2 != 0 {
		return errors.New("SETITEMS with an odd number of values")
	}
	switch t := d.(type) {
	case *dict:
		for i := 0; i < len(items); i += 2 {
			t.set(items[i], items[i+1])
		}
		return nil
	case *object:
		return nil // a dict subclass the machine does not know: its items are not needed
	}
	return fmt.Errorf("SETITEM on a %T", d)
}

// longOf decodes a little-endian two's-complement integer.
func longOf(s []byte) any {
	if len(s) <= 8 {
		var v int64
		for i := len(s) - 1; i >= 0; i-- {
			v = v<<8 | int64(s[i])
		}
		if len(s) > 0 && len(s) < 8 && s[len(s)-1]&0x80 != 0 {
			v -= 1 << (8 * uint(len(s)))
		}
		return v
	}
	be := make([]byte, len(s))
	for i := range s {
		be[len(s)-1-i] = s[i]
	}
	v := new(big.Int).SetBytes(be)
	if s[len(s)-1]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(s))))
	}
	return v
}

// textInt reads protocol 0's INT/LONG text (01/00 are True/False).
func textInt(s string) any {
	switch s {
	case "01":
		return true
	case "00":
		return false
	}
	if len(s) > 0 && s[len(s)-1] == 'L' {
		s = s[:len(s)-1]
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v
	}
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return s
	}
	return v
}

// persistent resolves torch.save's persistent ids: ('storage',
// StorageType, key, location, numel).
func persistent(pid any) (any, error) {
	t, ok := pid.(tuple)
	if !ok || len(t) < 5 {
		return nil, fmt.Errorf("persistent id %v is not torch's ('storage', type, key, location, numel)", pid)
	}
	if s, _ := t[0].(string); s != "storage" {
		return nil, fmt.Errorf("persistent id of kind %v, want 'storage'", t[0])
	}
	g, ok := t[1].(global)
	if !ok {
		return nil, fmt.Errorf("storage type %v is not a torch storage class", t[1])
	}
	key, ok := t[2].(string)
	if !ok {
		return nil, fmt.Errorf("storage key %v is not a string", t[2])
	}
	numel, ok := t[4].(int64)
	if !ok || numel < 0 {
		return nil, fmt.Errorf("storage %s: size %v", key, t[4])
	}
	return &storage{dtype: g.name, key: key, numel: numel}, nil
}

// call applies a global to its arguments.
func call(fn, args any) (any, error) {
	g, ok := fn.(global)
	if !ok {
		// A call of a value (a class's instance) — nothing a state_dict needs.
		return &object{}, nil
	}
	a, _ := args.(tuple)
	switch g.module + "." + g.name {
	case "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor":
		return rebuildTensor(a)
	case "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state":
		if len(a) == 0 {
			return nil, errors.New("_rebuild_parameter without its data")
		}
		return a[0], nil
	case "collections.OrderedDict", "builtins.dict", "__builtin__.dict":
		return &dict{}, nil
	case "_codecs.encode":
		if len(a) > 0 {
			if s, ok := a[0].(string); ok {
				// Protocol 2's bytes: a latin-1 string of them.
				b := make([]byte, 0, len(s))
				for _, r := range s {
					b = append(b, byte(r))
				}
				return b, nil
			}
		}
	}
	return &object{fn: g, args: a}, nil
}

func rebuildTensor(a tuple) (any, error) {
	if len(a) < 4 {
		return nil, fmt.Errorf("_rebuild_tensor with %d arguments, want at least 4", len(a))
	}
	st, ok := a[0].(*storage)
	if !ok {
		return nil, fmt.Errorf("tensor of a %T, not a storage", a[0])
	}
	off, ok := a[1].(int64)
	if !ok || off < 0 {
		return nil, fmt.Errorf("tensor offset %v", a[1])
	}
	shape, err := ints(a[2])
	if err != nil {
		return nil, fmt.Errorf("tensor size: %w", err)
	}
	stride, err := ints(a[3])
	if err != nil {
		return nil, fmt.Errorf("tensor stride: %w", err)
	}
	if len(shape) != len(stride) {
		return nil, fmt.Errorf("tensor of size %v with stride %v", shape, stride)
	}
	return &tensor{st: st, offset: off, shape: shape, stride: stride}, nil
}

func ints(v any) ([]int64, error) {
	t, ok := v.(tuple)
	if !ok {
		return nil, fmt.Errorf("%v is not a tuple", v)
	}
	out := make([]int64, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok || n < 0 {
			return nil, fmt.Errorf("%v", v)
		}
		out[i] = n
	}
	return out, nil
}
