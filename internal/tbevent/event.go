package tbevent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// FileVersion is the file_version of an event file's first event: the
// version TensorFlow's and TensorBoard's writers put there, which
// TensorBoard's loaders accept.
const FileVersion = "brain.Event:2"

// SessionStatus is a SessionLog's status (the enum of
// tensorflow/core/util/event.proto).
type SessionStatus int32

// SessionLog statuses. START at step s tells TensorBoard that a run
// (re)started there: it drops the events of earlier files with a step ≥ s,
// which a resumed run repeats.
const (
	StatusUnspecified SessionStatus = 0
	SessionStart      SessionStatus = 1
	SessionStop       SessionStatus = 2
	SessionCheckpoint SessionStatus = 3
)

// Value is one Summary.Value holding a simple_value: a scalar of a curve
// named Tag.
type Value struct {
	Tag    string
	Simple float32
}

// Event is one record of an event file. At most one of FileVersion,
// Summary and SessionLog is set (the proto's `what` oneof); a Summary that
// is not nil is written even when empty.
type Event struct {
	WallTime    float64 // seconds since the Unix epoch
	Step        int64
	FileVersion string
	Summary     []Value
	SessionLog  SessionStatus
}

// Protobuf wire types and the field keys written (field<<3 | wire type).
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5

	keyWallTime    = 1<<3 | wireFixed64
	keyStep        = 2<<3 | wireVarint
	keyFileVersion = 3<<3 | wireBytes
	keySummary     = 5<<3 | wireBytes
	keySessionLog  = 7<<3 | wireBytes
	keyValue       = 1<<3 | wireBytes   // Summary.value
	keyTag         = 1<<3 | wireBytes   // Value.tag
	keySimpleValue = 2<<3 | wireFixed32 // Value.simple_value
	keyStatus      = 1<<3 | wireVarint  // SessionLog.status
)

// Marshal encodes e as a tensorflow.Event in the canonical form protobuf's
// own serializers produce: fields in number order, proto3 scalars left out
// when zero (wall_time, step, status), and the oneof member written even
// when zero (a simple_value of 0 is still a value).
func Marshal(e Event) ([]byte, error) {
	set := 0
	if e.FileVersion != "" {
		set++
	}
	if e.Summary != nil {
		set++
	}
	if e.SessionLog != StatusUnspecified {
		set++
	}
	if set > 1 {
		return nil, errors.New("event: more than one of file_version, summary and session_log set")
	}
	var b []byte
	if e.WallTime != 0 {
		b = binary.AppendUvarint(b, keyWallTime)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.WallTime))
	}
	if e.Step != 0 {
		b = binary.AppendUvarint(b, keyStep)
		b = binary.AppendUvarint(b, uint64(e.Step)) // int64: two's complement
	}
	switch {
	case e.FileVersion != "":
		b = appendBytes(b, keyFileVersion, []byte(e.FileVersion))
	case e.Summary != nil:
		var s []byte
		for _, v := range e.Summary {
			var vb []byte
			if v.Tag != "" {
				vb = appendBytes(vb, keyTag, []byte(v.Tag))
			}
			vb = binary.AppendUvarint(vb, keySimpleValue)
			vb = binary.LittleEndian.AppendUint32(vb, math.Float32bits(v.Simple))
			s = appendBytes(s, keyValue, vb)
		}
		b = appendBytes(b, keySummary, s)
	case e.SessionLog != StatusUnspecified:
		var s []byte
		s = binary.AppendUvarint(s, keyStatus)
		s = binary.AppendUvarint(s, uint64(int64(e.SessionLog)))
		b = appendBytes(b, keySessionLog, s)
	}
	return b, nil
}

// appendBytes appends a length-delimited field.
func appendBytes(b []byte, key uint64, v []byte) []byte {
	b = binary.AppendUvarint(b, key)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// Unmarshal decodes a tensorflow.Event. Fields it does not model (graphs,
// run metadata, summary values other than simple_value: images,
// histograms, tensors) are skipped; malformed encoding is an error.
func Unmarshal(b []byte) (Event, error) {
	var e Event
	err := fields(b, func(num int, wire int, v uint64, data []byte) error {
		switch {
		case num == 1 && wire == wireFixed64:
			e.WallTime = math.Float64frombits(v)
		case num == 2 && wire == wireVarint:
			e.Step = int64(v)
		case num == 3 && wire == wireBytes:
			e.FileVersion = string(data)
		case num == 5 && wire == wireBytes:
			if e.Summary == nil {
				e.Summary = []Value{}
			}
			return fields(data, func(num, wire int, _ uint64, data []byte) error {
				if num != 1 || wire != wireBytes {
					return nil
				}
				val, ok, err := unmarshalValue(data)
				if err != nil {
					return fmt.Errorf("summary value: %w", err)
				}
				if ok {
					e.Summary = append(e.Summary, val)
				}
				return nil
			})
		case num == 7 && wire == wireBytes:
			return fields(data, func(num, wire int, v uint64, _ []byte) error {
				if num == 1 && wire == wireVarint {
					e.SessionLog = SessionStatus(int32(v))
				}
				return nil
			})
		}
		return nil
	})
	return e, err
}

// unmarshalValue decodes a Summary.Value; ok is false when it holds no
// simple_value.
func unmarshalValue(b []byte) (val Value, ok bool, err error) {
	err = fields(b, func(num, wire int, v uint64, data []byte) error {
		switch {
		case num == 1 && wire == wireBytes:
			val.Tag = string(data)
		case num == 2 && wire == wireFixed32:
			val.Simple, ok = math.Float32frombits(uint32(v)), true
		}
		return nil
	})
	return val, ok, err
}

// fields calls fn for each field of a protobuf message: its number, wire
// type, and its value (varint and fixed fields) or bytes (length-delimited
// ones).
func fields(b []byte, fn func(num, wire int, v uint64, data []byte) error) error {
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("bad field key")
		}
		b = b[n:]
		num, wire := int(key>>3), int(key&7)
		if num == 0 {
			return errors.New("field number 0")
		}
		var v uint64
		var data []byte
		switch wire {
		case wireVarint:
			v, n = binary.Uvarint(b)
			if n <= 0 {
				return fmt.Errorf("field %d: bad varint", num)
			}
			b = b[n:]
		case wireFixed64:
			if len(b) < 8 {
				return fmt.Errorf("field %d: short fixed64", num)
			}
			v, b = binary.LittleEndian.Uint64(b), b[8:]
		case wireFixed32:
			if len(b) < 4 {
				return fmt.Errorf("field %d: short fixed32", num)
			}
			v, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case wireBytes:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return fmt.Errorf("field %d: bad length", num)
			}
			data, b = b[n:n+int(l)], b[n+int(l):]
		default:
			return fmt.Errorf("field %d: unsupported wire type %d", num, wire)
		}
		if err := fn(num, wire, v, data); err != nil {
			return err
		}
	}
	return nil
}
