package dist

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The store's messages, both ways: an op (or a status) byte, a key, a
// value and an integer argument, lengths as little-endian uint32.
type message struct {
	op  byte
	key string
	val []byte
	arg int64
}

// maxValue bounds a value or key a peer may announce, so a stray
// connection cannot make the reader allocate gigabytes.
const maxValue = 64 << 20

func writeMessage(w io.Writer, m message) error {
	buf := make([]byte, 0, 1+4+len(m.key)+4+len(m.val)+8)
	buf = append(buf, m.op)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(m.key)))
	buf = append(buf, m.key...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(m.val)))
	buf = append(buf, m.val...)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(m.arg))
	_, err := w.Write(buf)
	return err
}

func readMessage(r io.Reader) (message, error) {
	var m message
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return m, err
	}
	m.op = hdr[0]
	key, err := readBlock(r, binary.LittleEndian.Uint32(hdr[1:]))
	if err != nil {
		return m, err
	}
	m.key = string(key)
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return m, unexpected(err)
	}
	if m.val, err = readBlock(r, binary.LittleEndian.Uint32(n[:])); err != nil {
		return m, err
	}
	var arg [8]byte
	if _, err := io.ReadFull(r, arg[:]); err != nil {
		return m, unexpected(err)
	}
	m.arg = int64(binary.LittleEndian.Uint64(arg[:]))
	return m, nil
}

func readBlock(r io.Reader, n uint32) ([]byte, error) {
	if n > maxValue {
		return nil, fmt.Errorf("a message announces %d bytes (at most %d): not a voxtrain store peer", n, maxValue)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, unexpected(err)
}

// unexpected turns an EOF inside a message into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
