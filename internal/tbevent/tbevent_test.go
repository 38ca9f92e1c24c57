package tbevent

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRecordFramingKnownAnswer frames a payload as TensorBoard's own
// writer does. The expected bytes were printed by tensorboard 2.21.0
// (tensorboard.summary.writer.record_writer.RecordWriter writing
// b"hello, tensorboard" into a BytesIO; masked_crc32c from
// tensorboard.compat.tensorflow_stub.pywrap_tensorflow).
func TestRecordFramingKnownAnswer(t *testing.T) {
	// CRC-32C's check value is 0xe3069283; masked as TFRecord masks it.
	if got := MaskedCRC([]byte("123456789")); got != 0xc78ab0e5 {
		t.Fatalf("MaskedCRC(123456789) = %#x, want 0xc78ab0e5", got)
	}
	payload := []byte("hello, tensorboard")
	want := unhex(t, "1200000000000000241f642568656c6c6f2c2074656e736f72626f617264ba263289")
	got := AppendRecord(nil, payload)
	if !bytes.Equal(got, want) {
		t.Fatalf("record\n got %x\nwant %x", got, want)
	}
	back, err := ReadRecord(bytes.NewReader(want))
	if err != nil || !bytes.Equal(back, payload) {
		t.Fatalf("read back %q, %v", back, err)
	}
	// Every single-bit flip is caught: in the length, either checksum or
	// the data.
	for i := range want {
		bad := bytes.Clone(want)
		bad[i] ^= 0x10
		if _, err := ReadRecord(bytes.NewReader(bad)); err == nil {
			t.Errorf("flipped byte %d: no error", i)
		}
	}
	// A record cut anywhere is truncated; an empty input is a clean end.
	for n := 1; n < len(want); n++ {
		if _, err := ReadRecord(bytes.NewReader(want[:n])); !errors.Is(err, ErrTruncated) {
			t.Errorf("cut at %d: %v, want ErrTruncated", n, err)
		}
	}
	if _, err := ReadRecord(bytes.NewReader(nil)); err != io.EOF {
		t.Errorf("empty: %v, want io.EOF", err)
	}
}

// TestMarshalMatchesProtobuf: events encode to the bytes protobuf's own
// serializer gives (tensorboard 2.21.0's event_pb2, protobuf's Python
// SerializeToString), and decode back.
func TestMarshalMatchesProtobuf(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   Event
		hex  string
	}{
		{"summary", Event{WallTime: 1700000000.5, Step: 42, Summary: []Value{{"train/loss", 0.25}, {"z", 0}}},
			"0900002040fc54d941102a2a1d0a110a0a747261696e2f6c6f7373150000803e0a080a017a1500000000"},
		{"file version", Event{WallTime: 1700000000, FileVersion: FileVersion},
			"0900000040fc54d9411a0d627261696e2e4576656e743a32"},
		{"session start", Event{WallTime: 1700000000.25, Step: 21, SessionLog: SessionStart},
			"0900001040fc54d94110153a020801"},
		{"negative step, empty summary", Event{Step: -1, Summary: []Value{}},
			"10ffffffffffffffffff012a00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Marshal(c.ev)
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, c.hex); !bytes.Equal(got, want) {
				t.Fatalf("\n got %x\nwant %x", got, want)
			}
			back, err := Unmarshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, c.ev) {
				t.Fatalf("decoded %+v, want %+v", back, c.ev)
			}
		})
	}
	if _, err := Marshal(Event{FileVersion: FileVersion, Summary: []Value{}}); err == nil {
		t.Error("two oneof members: no error")
	}
}

// TestUnmarshalSkipsOtherFields: fields this package does not model (a
// value's metadata and tensor, an event's source_metadata) are skipped,
// and a value without simple_value is left out.
func TestUnmarshalSkipsOtherFields(t *testing.T) {
	var v []byte
	v = appendBytes(v, keyTag, []byte("img"))
	v = appendBytes(v, 4<<3|wireBytes, []byte{0x08, 0x01}) // image
	var x []byte
	x = appendBytes(x, keyTag, []byte("x"))
	x = append(x, keySimpleValue, 0, 0, 0xc0, 0x3f) // 1.5
	var s []byte
	s = appendBytes(s, keyValue, v)
	s = appendBytes(s, keyValue, x)
	var b []byte
	b = appendBytes(b, keySummary, s)
	b = appendBytes(b, 10<<3|wireBytes, []byte("source"))
	b = append(b, 0x20, 0x05) // field 4 as a varint: unknown wire use, skipped
	e, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Summary) != 1 || e.Summary[0] != (Value{"x", 1.5}) {
		t.Fatalf("%+v", e)
	}
	for _, bad := range [][]byte{{0x0a, 0x05, 0x01}, {0x09, 0x01}, {0x80}, {0x0b}} {
		if _, err := Unmarshal(bad); err == nil {
			t.Errorf("%x: no error", bad)
		}
	}
}

// TestWriterFilesAndScalars: each writer makes its own file, starting
// with the file version; a second START drops the points at or after its
// step that earlier files hold, the first does not; files of the same
// second sort in creation order.
func TestWriterFilesAndScalars(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tb")
	start := time.Unix(1700000000, 500_000_000)
	write := func(from int64, steps ...int64) string {
		w, err := Create(dir, start)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.Write(Event{WallTime: 1, Step: from + 1, SessionLog: SessionStart}); err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			if err := w.Write(Event{WallTime: float64(s), Step: s, Summary: []Value{{"loss", float32(from) + float32(s)/100}}}); err != nil {
				t.Fatal(err)
			}
		}
		return w.Path()
	}
	a := write(0, 10, 20, 30)
	b := write(20, 30, 40) // resumed from step 20: its 30 replaces a's
	if !strings.HasSuffix(a, ".0.voxtrain") || !strings.HasSuffix(b, ".1.voxtrain") || !strings.Contains(a, "events.out.tfevents.1700000000.") {
		t.Fatalf("names %s, %s", a, b)
	}
	files, err := Files(dir)
	if err != nil || len(files) != 2 || files[0] != a || files[1] != b {
		t.Fatalf("files %v, %v", files, err)
	}
	evs, err := ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 5 || evs[0].FileVersion != FileVersion || evs[0].WallTime != 1700000000.5 {
		t.Fatalf("events %+v", evs)
	}
	sc, err := ReadScalars(dir)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	var vals []float32
	for _, p := range sc["loss"] {
		steps, vals = append(steps, p.Step), append(vals, p.Value)
	}
	if !reflect.DeepEqual(steps, []int64{10, 20, 30, 40}) || !reflect.DeepEqual(vals, []float32{0.1, 0.2, 20.3, 20.4}) {
		t.Fatalf("curve %v %v", steps, vals)
	}

	// A torn last record is reported, naming the file, after the events
	// before it.
	raw, _ := os.ReadFile(b)
	if err := os.WriteFile(b, raw[:len(raw)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	evs, err = ReadFile(b)
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), b) || len(evs) != 3 {
		t.Fatalf("torn file: %d events, %v", len(evs), err)
	}
}

func TestSimpleValueBits(t *testing.T) {
	// NaN and ±Inf survive the encoding (a Dice of an absent class is NaN).
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 1e-38} {
		b, _ := Marshal(Event{Summary: []Value{{"v", v}}})
		e, err := Unmarshal(b)
		if err != nil || math.Float32bits(e.Summary[0].Simple) != math.Float32bits(v) {
			t.Errorf("%v: %v %v", v, e, err)
		}
	}
}
