package torchpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// The pickle machine: the opcodes of protocols 0–5 that torch.save and
// the objects around a state_dict use, building plain Go values —
// string, int64, *big.Int, float64, bool, nil, []byte, tuple, *list,
// *dict, global, *object, *storage, *tensor. No Python code runs: a
// global is a name, and calling it (REDUCE, NEWOBJ) builds an *object
// unless it is one of the few functions torch.save writes (objects.go).
// Malformed input is an error, never a panic.

// mark is the stack's MARK.
type mark struct{}

// maxStack bounds the stack and the memo: a pickle's own size bounds both
// anyway, but a malformed one must not make the machine grow without end.
const maxStack = 1 << 24

// unpickle runs the pickle in b and returns what STOP leaves.
func unpickle(b []byte) (any, error) {
	m := &machine{b: b, memo: map[uint64]any{}}
	v, err := m.run()
	if err != nil {
		return nil, fmt.Errorf("pickle at byte %d: %w", m.pos, err)
	}
	return v, nil
}

type machine struct {
	b     []byte
	pos   int
	stack []any
	memo  map[uint64]any
}

var errShort = errors.New("truncated")

func (m *machine) read(n int) ([]byte, error) {
	if n < 0 || n > len(m.b)-m.pos {
		return nil, errShort
	}
	s := m.b[m.pos : m.pos+n]
	m.pos += n
	return s, nil
}

func (m *machine) line() (string, error) {
	for i := m.pos; i < len(m.b); i++ {
		if m.b[i] == '\n' {
			s := string(m.b[m.pos:i])
			m.pos = i + 1
			return s, nil
		}
	}
	return "", errShort
}

func (m *machine) uint(n int) (uint64, error) {
	s, err := m.read(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(s[i])
	}
	return v, nil
}

func (m *machine) push(v any) error {
	if len(m.stack) >= maxStack {
		return errors.New("stack too deep")
	}
	m.stack = append(m.stack, v)
	return nil
}

func (m *machine) pop() (any, error) {
	if len(m.stack) == 0 {
		return nil, errors.New("pop from an empty stack")
	}
	v := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	if _, ok := v.(mark); ok {
		return nil, errors.New("a MARK where a value was expected")
	}
	return v, nil
}

func (m *machine) top() (any, error) {
	if len(m.stack) == 0 {
		return nil, errors.New("empty stack")
	}
	return m.stack[len(m.stack)-1], nil
}

// popMark pops the values above the topmost MARK, and the MARK.
func (m *machine) popMark() ([]any, error) {
	for i := len(m.stack) - 1; i >= 0; i-- {
		if _, ok := m.stack[i].(mark); ok {
			items := append([]any(nil), m.stack[i+1:]...)
			m.stack = m.stack[:i]
			return items, nil
		}
	}
	return nil, errors.New("no MARK on the stack")
}

func (m *machine) bytesOf(n uint64) ([]byte, error) {
	if n > uint64(len(m.b)) {
		return nil, errShort
	}
	return m.read(int(n))
}

func (m *machine) run() (any, error) {
	for {
		if m.pos >= len(m.b) {
			return nil, errors.New("no STOP")
		}
		op := m.b[m.pos]
		m.pos++
		var err error
		switch op {
		case 0x80: // PROTO
			_, err = m.read(1)
		case 0x95: // FRAME
			_, err = m.read(8)
		case '.': // STOP
			v, err := m.pop()
			return v, err
		case '(': // MARK
			err = m.push(mark{})
		case '0': // POP
			if len(m.stack) == 0 {
				err = errors.New("POP from an empty stack")
			} else {
				m.stack = m.stack[:len(m.stack)-1]
			}
		case '1': // POP_MARK
			_, err = m.popMark()
		case '2': // DUP
			var v any
			if v, err = m.top(); err == nil {
				err = m.push(v)
			}
		case 'N':
			err = m.push(nil)
		case 0x88:
			err = m.push(true)
		case 0x89:
			err = m.push(false)
		case 'J': // BININT
			var v uint64
			if v, err = m.uint(4); err == nil {
				err = m.push(int64(int32(uint32(v))))
			}
		case 'K': // BININT1
			var v uint64
			if v, err = m.uint(1); err == nil {
				err = m.push(int64(v))
			}
		case 'M': // BININT2
			var v uint64
			if v, err = m.uint(2); err == nil {
				err = m.push(int64(v))
			}
		case 0x8a, 0x8b: // LONG1, LONG4
			var n uint64
			if op == 0x8a {
				n, err = m.uint(1)
			} else {
				n, err = m.uint(4)
			}
			var s []byte
			if err == nil {
				s, err = m.bytesOf(n)
			}
			if err == nil {
				err = m.push(longOf(s))
			}
		case 'I', 'L': // INT, LONG (text)
			var s string
			if s, err = m.line(); err == nil {
				err = m.push(textInt(s))
			}
		case 'G': // BINFLOAT (big-endian)
			var s []byte
			if s, err = m.read(8); err == nil {
				err = m.push(math.Float64frombits(binary.BigEndian.Uint64(s)))
			}
		case 'F': // FLOAT (text)
			var s string
			if s, err = m.line(); err == nil {
				f, perr := strconv.ParseFloat(s, 64)
				if perr != nil {
					err = perr
				} else {
					err = m.push(f)
				}
			}
		case 'X', 0x8c, 0x8d, 'T', 'U', 'B', 'C', 0x8e, 0x96: // strings and bytes with a length
			var n uint64
			switch op {
			case 0x8c, 'U', 'C':
				n, err = m.uint(1)
			case 0x8d, 0x8e, 0x96:
				n, err = m.uint(8)
			default:
				n, err = m.uint(4)
			}
			var s []byte
			if err == nil {
				s, err = m.bytesOf(n)
			}
			if err == nil {
				if op == 'B' || op == 'C' || op == 0x8e || op == 0x96 {
					err = m.push(append([]byte(nil), s...))
				} else {
					err = m.push(string(s))
				}
			}
		case 'V', 'S': // UNICODE, STRING (text): kept as written
			var s string
			if s, err = m.line(); err == nil {
				err = m.push(s)
			}
		case ')':
			err = m.push(tuple{})
		case 't':
			var items []any
			if items, err = m.popMark(); err == nil {
				err = m.push(tuple(items))
			}
		case 0x85, 0x86, 0x87: // TUPLE1..3
			n := int(op - 0x84)
			if len(m.stack) < n {
				err = errors.New("TUPLE past the stack")
				break
			}
			items := append(tuple(nil), m.stack[len(m.stack)-n:]...)
			for _, it := range items {
				if _, ok := it.(mark); ok {
					err = errors.New("a MARK in a tuple")
				}
			}
			m.stack = m.stack[:len(m.stack)-n]
			if err == nil {
				err = m.push(items)
			}
		case ']':
			err = m.push(&list{})
		case 'l':
			var items []any
			if items, err = m.popMark(); err == nil {
				err = m.push(&list{items: items})
			}
		case 'a': // APPEND
			var v, l any
			if v, err = m.pop(); err == nil {
				if l, err = m.top(); err == nil {
					err = appendTo(l, v)
				}
			}
		case 'e', 0x90: // APPENDS, ADDITEMS
			var items []any
			var l any
			if items, err = m.popMark(); err == nil {
				if l, err = m.top(); err == nil {
					for _, v := range items {
						if err = appendTo(l, v); err != nil {
							break
						}
					}
				}
			}
		case 0x8f: // EMPTY_SET
			err = m.push(&list{})
		case 0x91: // FROZENSET
			var items []any
			if items, err = m.popMark(); err == nil {
				err = m.push(&list{items: items})
			}
		case '}':
			err = m.push(&dict{})
		case 'd':
			var items []any
			if items, err = m.popMark(); err == nil {
				d := &dict{}
				if err = setItems(d, items); err == nil {
					err = m.push(d)
				}
			}
		case 's': // SETITEM
			var k, v, d any
			if v, err = m.pop(); err == nil {
				if k, err = m.pop(); err == nil {
					if d, err = m.top(); err == nil {
						err = setItems(d, []any{k, v})
					}
				}
			}
		case 'u': // SETITEMS
			var items []any
			var d any
			if items, err = m.popMark(); err == nil {
				if d, err = m.top(); err == nil {
					err = setItems(d, items)
				}
			}
		case 'c': // GLOBAL
			var mod, name string
			if mod, err = m.line(); err == nil {
				if name, err = m.line(); err == nil {
					err = m.push(global{mod, name})
				}
			}
		case 0x93: // STACK_GLOBAL
			var mod, name any
			if name, err = m.pop(); err == nil {
				if mod, err = m.pop(); err == nil {
					ms, ok1 := mod.(string)
					ns, ok2 := name.(string)
					if !ok1 || !ok2 {
						err = errors.New("STACK_GLOBAL of non-strings")
					} else {
						err = m.push(global{ms, ns})
					}
				}
			}
		case 'R', 0x81: // REDUCE, NEWOBJ
			var args, fn any
			if args, err = m.pop(); err == nil {
				if fn, err = m.pop(); err == nil {
					var v any
					if v, err = call(fn, args); err == nil {
						err = m.push(v)
					}
				}
			}
		case 0x92: // NEWOBJ_EX
			var kw, args, fn any
			if kw, err = m.pop(); err == nil {
				if args, err = m.pop(); err == nil {
					if fn, err = m.pop(); err == nil {
						_ = kw
						var v any
						if v, err = call(fn, args); err == nil {
							err = m.push(v)
						}
					}
				}
			}
		case 'b': // BUILD
			var state, obj any
			if state, err = m.pop(); err == nil {
				if obj, err = m.top(); err == nil {
					if o, ok := obj.(*object); ok {
						o.state = state
					}
					// A dict's or a tensor's state (an OrderedDict's
					// _metadata, a parameter's attributes) is not needed.
				}
			}
		case 'q', 'r', 'p', 0x94: // BINPUT, LONG_BINPUT, PUT, MEMOIZE
			idx := uint64(len(m.memo))
			if op != 0x94 {
				idx, err = m.memoIndex(op)
			}
			var v any
			if err == nil {
				v, err = m.top()
			}
			if err == nil {
				if len(m.memo) >= maxStack {
					err = errors.New("memo too large")
				} else {
					m.memo[idx] = v
				}
			}
		case 'h', 'j', 'g': // BINGET, LONG_BINGET, GET
			var idx uint64
			idx, err = m.memoIndex(op)
			if err == nil {
				v, ok := m.memo[idx]
				if !ok {
					err = fmt.Errorf("memo %d was never stored", idx)
				} else {
					err = m.push(v)
				}
			}
		case 'Q': // BINPERSID
			var pid any
			if pid, err = m.pop(); err == nil {
				var v any
				if v, err = persistent(pid); err == nil {
					err = m.push(v)
				}
			}
		default:
			err = fmt.Errorf("opcode 0x%02x is not one a torch.save file holds", op)
		}
		if err != nil {
			return nil, err
		}
	}
}

// memoIndex reads the memo index of a PUT or GET: one byte (BINPUT,
// BINGET), four (LONG_BINPUT, LONG_BINGET) or a line of text (PUT, GET).
func (m *machine) memoIndex(op byte) (uint64, error) {
	switch op {
	case 'q', 'h':
		return m.uint(1)
	case 'r', 'j':
		return m.uint(4)
	}
	s, err := m.line()
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(s, 10, 32)
}
