// Package tbevent writes and reads TensorBoard event files
// (events.out.tfevents.*): TFRecord framing around serialized
// tensorflow.Event protocol buffers, encoded by hand. Only what scalar
// curves need is modelled — an Event's wall time and step, the file
// version, a Summary of simple (float) values, and a SessionLog status —
// so voxtrain writes TensorBoard files without a protobuf or TensorFlow
// dependency. The reader skips every other field, so it reads files other
// writers made too.
//
// The protos (tensorflow/core/util/event.proto and
// tensorflow/core/framework/summary.proto, copied into TensorBoard as
// tensorboard/compat/proto/):
//
//	message Event {
//	  double wall_time = 1;
//	  int64 step = 2;
//	  oneof what {
//	    string file_version = 3;
//	    Summary summary = 5;
//	    SessionLog session_log = 7;
//	    ...
//	  }
//	}
//	message Summary { repeated Value value = 1; }
//	message Value { string tag = 1; oneof value { float simple_value = 2; ... } }
//	message SessionLog { SessionStatus status = 1; ... }  // START = 1
package tbevent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// castagnoli is the CRC-32C table TFRecord checksums use.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskDelta is TFRecord's checksum mask constant.
const maskDelta = 0xa282ead8

// MaskedCRC is TFRecord's masked CRC-32C of b. The mask exists because
// computing a CRC of data that embeds CRCs is problematic; TFRecord
// rotates and offsets every checksum it stores.
func MaskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + maskDelta
}

// AppendRecord appends data to dst as one TFRecord: its length (uint64,
// little-endian), the masked CRC of those 8 bytes, data, and the masked
// CRC of data.
func AppendRecord(dst, data []byte) []byte {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	dst = append(dst, n[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, MaskedCRC(n[:]))
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, MaskedCRC(data))
}

// maxRecord bounds a record's length as read, so that a corrupt length
// (its CRC matching by chance) cannot make the reader allocate gigabytes.
// Scalar events are a few hundred bytes.
const maxRecord = 256 << 20

// ErrTruncated reports a record cut short: the end of a file that its
// writer is still appending to, or one a crash cut.
var ErrTruncated = errors.New("truncated record")

// ReadRecord reads one TFRecord from r and checks both checksums. It
// returns io.EOF at a clean end and an error wrapping ErrTruncated when r
// ends inside a record.
func ReadRecord(r io.Reader) ([]byte, error) {
	var head [12]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("record header: %w", truncated(err))
	}
	if got, want := binary.LittleEndian.Uint32(head[8:]), MaskedCRC(head[:8]); got != want {
		return nil, fmt.Errorf("record length checksum %#08x, want %#08x", got, want)
	}
	n := binary.LittleEndian.Uint64(head[:8])
	if n > maxRecord {
		return nil, fmt.Errorf("record length %d exceeds %d", n, maxRecord)
	}
	buf := make([]byte, n+4)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("record of %d bytes: %w", n, truncated(err))
	}
	data := buf[:n]
	if got, want := binary.LittleEndian.Uint32(buf[n:]), MaskedCRC(data); got != want {
		return nil, fmt.Errorf("record data checksum %#08x, want %#08x", got, want)
	}
	return data, nil
}

func truncated(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return ErrTruncated
	}
	return err
}
