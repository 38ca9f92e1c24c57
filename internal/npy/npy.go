// Package npy writes and reads numpy's .npy (format version 1.0) and .npz
// files holding float32 arrays, so Python users open voxtrain's outputs
// with numpy alone:
//
//	np.load("case.npz")["probabilities"]
//
// Only what voxtrain writes is supported: little-endian float32 ("<f4"),
// C order (the last axis fastest). An .npz is a zip archive of NAME.npy
// members, as np.savez writes it; members are stored uncompressed (numpy
// reads stored and deflated members alike, and storing costs no CPU time
// while the next case is predicted). Archives over 4 GiB use zip64, which
// Python's zipfile reads.
package npy

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/internal/floatbytes"
)

// Array is a C-order float32 array: Data holds the product of Shape values,
// the last axis fastest.
type Array struct {
	Shape []int
	Data  []float32
}

// magic starts every .npy file; then the format version (1, 0).
const magic = "\x93NUMPY"

// align is the multiple the magic, version, header length and header add
// up to, as numpy pads them (its ARRAY_ALIGN: the format asks for 16, numpy
// writes 64 so the data of a memory-mapped file is aligned for any dtype).
const align = 64

// check reports an Array whose Data does not fill its Shape.
func (a Array) check() error {
	n := 1
	for _, s := range a.Shape {
		if s < 0 {
			return fmt.Errorf("npy: negative dimension in shape %v", a.Shape)
		}
		n *= s
	}
	if n != len(a.Data) {
		return fmt.Errorf("npy: shape %v holds %d values, the data has %d", a.Shape, n, len(a.Data))
	}
	return nil
}

// header returns the .npy preamble of a: magic, version 1.0, the header
// length and the header dict padded with spaces and a newline.
func header(a Array) []byte {
	dims := make([]string, len(a.Shape))
	for i, s := range a.Shape {
		dims[i] = strconv.Itoa(s)
	}
	shape := "(" + strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += "," // a one-tuple, as Python writes it
	}
	shape += ")"
	dict := "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }"
	pre := len(magic) + 2 + 2
	total := pre + len(dict) + 1 // + the newline
	pad := (align - total%align) % align
	var b bytes.Buffer
	b.WriteString(magic)
	b.Write([]byte{1, 0})
	binary.Write(&b, binary.LittleEndian, uint16(len(dict)+pad+1))
	b.WriteString(dict)
	b.WriteString(strings.Repeat(" ", pad))
	b.WriteByte('\n')
	return b.Bytes()
}

// Write writes a as a .npy file to w.
func Write(w io.Writer, a Array) error {
	if err := a.check(); err != nil {
		return err
	}
	if _, err := w.Write(header(a)); err != nil {
		return err
	}
	if floatbytes.LittleEndian {
		_, err := w.Write(floatbytes.Bytes(a.Data))
		return err
	}
	buf := make([]byte, 4*4096)
	for i := 0; i < len(a.Data); i += 4096 {
		chunk := a.Data[i:min(i+4096, len(a.Data))]
		for j, v := range chunk {
			binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(v))
		}
		if _, err := w.Write(buf[:4*len(chunk)]); err != nil {
			return err
		}
	}
	return nil
}

var (
	descrRe   = regexp.MustCompile(`'descr':\s*'([^']*)'`)
	fortranRe = regexp.MustCompile(`'fortran_order':\s*(True|False)`)
	shapeRe   = regexp.MustCompile(`'shape':\s*\(([^)]*)\)`)
)

// Read reads one .npy array from r: version 1.0 to 3.0 headers, "<f4"
// data in C order; anything else is an error saying what it is.
func Read(r io.Reader) (Array, error) {
	br := bufio.NewReader(r)
	pre := make([]byte, len(magic)+2)
	if _, err := io.ReadFull(br, pre); err != nil {
		return Array{}, fmt.Errorf("npy: short file: %w", err)
	}
	if string(pre[:len(magic)]) != magic {
		return Array{}, errors.New("npy: not a .npy file (no \\x93NUMPY magic)")
	}
	var hlen int
	switch pre[len(magic)] {
	case 1:
		var n uint16
		if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
			return Array{}, fmt.Errorf("npy: header length: %w", err)
		}
		hlen = int(n)
	case 2, 3:
		var n uint32
		if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
			return Array{}, fmt.Errorf("npy: header length: %w", err)
		}
		if n > 1<<20 {
			return Array{}, fmt.Errorf("npy: header of %d bytes", n)
		}
		hlen = int(n)
	default:
		return Array{}, fmt.Errorf("npy: format version %d.%d", pre[len(magic)], pre[len(magic)+1])
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(br, hb); err != nil {
		return Array{}, fmt.Errorf("npy: header: %w", err)
	}
	h := string(hb)
	d, f, s := descrRe.FindStringSubmatch(h), fortranRe.FindStringSubmatch(h), shapeRe.FindStringSubmatch(h)
	if d == nil || f == nil || s == nil {
		return Array{}, fmt.Errorf("npy: header %q lacks descr, fortran_order or shape", strings.TrimSpace(h))
	}
	if d[1] != "<f4" {
		return Array{}, fmt.Errorf("npy: dtype %q, only little-endian float32 (<f4) is read", d[1])
	}
	if f[1] != "False" {
		return Array{}, errors.New("npy: Fortran-order array, only C order is read")
	}
	a := Array{Shape: []int{}}
	n := 1
	for _, p := range strings.Split(s[1], ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Array{}, fmt.Errorf("npy: shape (%s)", s[1])
		}
		if v > 0 && n > math.MaxInt/4/v {
			return Array{}, fmt.Errorf("npy: shape (%s) too large", s[1])
		}
		a.Shape = append(a.Shape, v)
		n *= v
	}
	raw := make([]byte, 4*n)
	if _, err := io.ReadFull(br, raw); err != nil {
		return Array{}, fmt.Errorf("npy: data of shape %v: %w", a.Shape, err)
	}
	a.Data = make([]float32, n)
	for i := range a.Data {
		a.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return a, nil
}

// Named is an array and the name np.load's result gives it.
type Named struct {
	Name string
	Array
}

// WriteNPZ writes the arrays to w as an .npz archive: one stored (not
// compressed) member NAME.npy per array, in order.
func WriteNPZ(w io.Writer, arrays ...Named) error {
	z := zip.NewWriter(w)
	for _, a := range arrays {
		if a.Name == "" || strings.ContainsAny(a.Name, "/\\") {
			return fmt.Errorf("npz: array name %q", a.Name)
		}
		if err := a.check(); err != nil {
			return fmt.Errorf("npz: %s: %w", a.Name, err)
		}
		m, err := z.CreateHeader(&zip.FileHeader{Name: a.Name + ".npy", Method: zip.Store})
		if err != nil {
			return err
		}
		if err := Write(m, a.Array); err != nil {
			return fmt.Errorf("npz: %s: %w", a.Name, err)
		}
	}
	return z.Close()
}

// ReadNPZ reads every NAME.npy member of the .npz archive r (size bytes)
// by name.
func ReadNPZ(r io.ReaderAt, size int64) (map[string]Array, error) {
	z, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("npz: %w", err)
	}
	out := map[string]Array{}
	for _, f := range z.File {
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("npz: %s: %w", f.Name, err)
		}
		a, err := Read(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("npz: %s: %w", f.Name, err)
		}
		out[name] = a
	}
	return out, nil
}
