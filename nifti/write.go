package nifti

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
)

// Writer writes NIfTI files. The zero value is ready to use.
type Writer struct {
	// GzipLevel is the compression level for .gz outputs (klauspost/compress
	// levels, 1 fastest to 9 smallest); 0 means gzip.DefaultCompression.
	GzipLevel int
}

// WriteFloat32 writes data (in file order, x fastest; RGB as planar
// channels, as ReadFloat32 returns them) to path, stored as h.Datatype.
// When h has valid scaling (see Header.Scaling) the stored value is
// (v − scl_inter) / scl_slope. Integer types round half to even and saturate
// at the type's range; NaN stores 0. The container follows the extension:
// .nii, .nii.gz, or a .hdr/.img pair (.hdr.gz/.img.gz compress both). Each
// file is written to a temporary name in its directory and renamed into
// place, so a reader never sees a half-written file. Files get the
// umask's permissions, as with os.Create.
func WriteFloat32(path string, h *Header, data []float32) error {
	return (&Writer{}).WriteFloat32(path, h, data)
}

// WriteRaw writes raw voxel bytes (little-endian, in file order, exactly
// h.DataSize() bytes) to path as WriteFloat32 does, without conversion.
func WriteRaw(path string, h *Header, raw []byte) error { return (&Writer{}).WriteRaw(path, h, raw) }

// WriteFloat32 is the package-level WriteFloat32 with this Writer's settings.
func (w *Writer) WriteFloat32(path string, h *Header, data []float32) error {
	info, ok := dtTable[h.Datatype]
	if !ok || (!info.scalar && h.Datatype != RGB24 && h.Datatype != RGBA32) {
		return fmt.Errorf("nifti: write %s: cannot store float32 values as %v", path, h.Datatype)
	}
	nvox := h.NumVoxels()
	if int64(len(data)) != nvox*int64(info.ncomp) {
		return fmt.Errorf("nifti: write %s: %d values for dims %v (%d voxels × %d components)", path, len(data), h.Shape(), nvox, info.ncomp)
	}
	slope, inter, err := h.Scaling()
	if err != nil {
		return fmt.Errorf("nifti: write %s: %w", path, err)
	}
	le := h.ByteOrder != binary.BigEndian
	emit := func(out io.Writer) error {
		const chunk = 64 << 10
		per := chunk / info.size
		buf := make([]byte, per*info.size)
		for done := int64(0); done < nvox; {
			k := min(int64(per), nvox-done)
			b := buf[:k*int64(info.size)]
			if info.scalar {
				encode(h.Datatype, le, data[done:done+k], b, slope, inter)
			} else {
				for c := 0; c < info.ncomp; c++ {
					ch := data[int64(c)*nvox+done : int64(c)*nvox+done+k]
					for i, v := range ch {
						b[i*info.size+c] = byte(toInt((float64(v)-inter)/slope, 0, 255))
					}
				}
			}
			if _, err := out.Write(b); err != nil {
				return err
			}
			done += k
		}
		return nil
	}
	return w.write(path, h, emit)
}

// WriteRaw is the package-level WriteRaw with this Writer's settings.
func (w *Writer) WriteRaw(path string, h *Header, raw []byte) error {
	if !h.Datatype.Supported() {
		return fmt.Errorf("nifti: write %s: unsupported datatype %v", path, h.Datatype)
	}
	if int64(len(raw)) != h.DataSize() {
		return fmt.Errorf("nifti: write %s: %d bytes of voxel data, dims %v × %d bytes need %d", path, len(raw), h.Shape(), h.Datatype.Size(), h.DataSize())
	}
	emit := func(out io.Writer) error {
		if h.ByteOrder != binary.BigEndian {
			_, err := out.Write(raw)
			return err
		}
		const chunk = 64 << 10
		buf := make([]byte, chunk)
		comp := dtTable[h.Datatype].comp
		for off := 0; off < len(raw); off += chunk {
			b := buf[:copy(buf, raw[off:])]
			swapInPlace(b, comp) // LE → BE: the same byte reversal
			if _, err := out.Write(b); err != nil {
				return err
			}
		}
		return nil
	}
	return w.write(path, h, emit)
}

func (w *Writer) write(path string, h *Header, emit func(io.Writer) error) error {
	if err := validateForWrite(h); err != nil {
		return fmt.Errorf("nifti: write %s: %w", path, err)
	}
	hdrPath, imgPath, err := writePaths(path)
	if err != nil {
		return err
	}
	ext := encodeExtensions(h)
	if hdrPath == imgPath {
		hsize := int64(Nifti1HeaderSize)
		if h.Version == 2 {
			hsize = Nifti2HeaderSize
		}
		voxOffset := hsize + extFlagSize + int64(len(ext))
		hb, err := h.encode(false, voxOffset)
		if err != nil {
			return fmt.Errorf("nifti: write %s: %w", path, err)
		}
		return w.atomicWrite(path, func(out io.Writer) error {
			if _, err := out.Write(hb); err != nil {
				return err
			}
			if err := writeExtFlag(out, ext); err != nil {
				return err
			}
			return emit(out)
		})
	}
	hb, err := h.encode(true, 0)
	if err != nil {
		return fmt.Errorf("nifti: write %s: %w", path, err)
	}
	if err := w.atomicWrite(hdrPath, func(out io.Writer) error {
		if _, err := out.Write(hb); err != nil {
			return err
		}
		if len(ext) > 0 {
			return writeExtFlag(out, ext)
		}
		return nil
	}); err != nil {
		return err
	}
	return w.atomicWrite(imgPath, emit)
}

func writeExtFlag(out io.Writer, ext []byte) error {
	flag := []byte{0, 0, 0, 0}
	if len(ext) > 0 {
		flag[0] = 1
	}
	if _, err := out.Write(flag); err != nil {
		return err
	}
	_, err := out.Write(ext)
	return err
}

// encodeExtensions serialises h.Extensions, each padded to a multiple of 16
// bytes as the standard requires.
func encodeExtensions(h *Header) []byte {
	o := h.ByteOrder
	if o == nil {
		o = binary.LittleEndian
	}
	var out []byte
	for _, e := range h.Extensions {
		size := (8 + len(e.Data) + 15) / 16 * 16
		b := make([]byte, size)
		o.PutUint32(b[0:], uint32(size))
		o.PutUint32(b[4:], uint32(e.Code))
		copy(b[8:], e.Data)
		out = append(out, b...)
	}
	return out
}

func validateForWrite(h *Header) error {
	if h.Version != 1 && h.Version != 2 {
		return fmt.Errorf("header version %d, want 1 or 2", h.Version)
	}
	nd := h.Dim[0]
	if nd < 1 || nd > 7 {
		return fmt.Errorf("dim[0] = %d, want 1 to 7", nd)
	}
	for i, d := range h.Shape() {
		if d <= 0 {
			return fmt.Errorf("dim[%d] = %d, want > 0", i+1, h.Dim[i+1])
		}
	}
	if !h.Datatype.Supported() {
		return fmt.Errorf("unsupported datatype %v", h.Datatype)
	}
	return nil
}

// filePerm is the mode of the files Writer writes, filtered by the umask
// as os.Create's is (0644 under umask 022): images and predictions are
// data other users open in their viewers and pipelines.
const filePerm = 0o666

// atomicWrite writes a file through emit, gzip-compressed when the name ends
// in .gz, with atomicfile: a reader never sees a half-written file.
func (w *Writer) atomicWrite(name string, emit func(io.Writer) error) error {
	f, err := atomicfile.CreateUmask(name, filePerm)
	if err != nil {
		return fmt.Errorf("nifti: write %s: %w", name, err)
	}
	defer f.Close() // discards the temporary file unless committed
	if err := w.encodeTo(f, name, emit); err != nil {
		return fmt.Errorf("nifti: write %s: %w", name, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("nifti: write %s: %w", name, err)
	}
	return nil
}

// encodeTo runs emit into f through a write buffer and, for a .gz name, a
// gzip stream at the Writer's level, and flushes both.
func (w *Writer) encodeTo(f io.Writer, name string, emit func(io.Writer) error) error {
	bw := bufio.NewWriterSize(f, 256<<10)
	if !strings.HasSuffix(strings.ToLower(name), ".gz") {
		if err := emit(bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	level := w.GzipLevel
	if level == 0 {
		level = gzip.DefaultCompression
	}
	gz, err := gzip.NewWriterLevel(bw, level)
	if err != nil {
		return err
	}
	if err := emit(gz); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// encode converts float32 values to stored voxels of type dt in dst.
func encode(dt Datatype, le bool, src []float32, dst []byte, slope, inter float64) {
	var o binary.ByteOrder = binary.LittleEndian
	if !le {
		o = binary.BigEndian
	}
	unscale := func(v float32) float64 { return (float64(v) - inter) / slope }
	switch dt {
	case Uint8:
		for i, v := range src {
			dst[i] = byte(toInt(unscale(v), 0, math.MaxUint8))
		}
	case Int8:
		for i, v := range src {
			dst[i] = byte(int8(toInt(unscale(v), math.MinInt8, math.MaxInt8)))
		}
	case Int16:
		for i, v := range src {
			o.PutUint16(dst[2*i:], uint16(int16(toInt(unscale(v), math.MinInt16, math.MaxInt16))))
		}
	case Uint16:
		for i, v := range src {
			o.PutUint16(dst[2*i:], uint16(toInt(unscale(v), 0, math.MaxUint16)))
		}
	case Int32:
		for i, v := range src {
			o.PutUint32(dst[4*i:], uint32(int32(toInt(unscale(v), math.MinInt32, math.MaxInt32))))
		}
	case Uint32:
		for i, v := range src {
			o.PutUint32(dst[4*i:], uint32(toInt(unscale(v), 0, math.MaxUint32)))
		}
	case Int64:
		for i, v := range src {
			o.PutUint64(dst[8*i:], uint64(toInt(unscale(v), math.MinInt64, math.MaxInt64)))
		}
	case Uint64:
		for i, v := range src {
			o.PutUint64(dst[8*i:], toUint64(unscale(v)))
		}
	case Float32:
		scaled := slope != 1 || inter != 0
		for i, v := range src {
			if scaled {
				v = float32(unscale(v))
			}
			o.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case Float64:
		for i, v := range src {
			o.PutUint64(dst[8*i:], math.Float64bits(unscale(v)))
		}
	}
}

// toInt rounds half to even and saturates to [lo, hi]; NaN gives 0.
func toInt(v float64, lo, hi float64) int64 {
	if math.IsNaN(v) {
		return 0
	}
	v = math.RoundToEven(v)
	if v <= lo {
		return int64(lo)
	}
	if v >= hi {
		if hi >= math.MaxInt64 {
			return math.MaxInt64
		}
		return int64(hi)
	}
	return int64(v)
}

func toUint64(v float64) uint64 {
	if math.IsNaN(v) || v <= 0 {
		return 0
	}
	v = math.RoundToEven(v)
	if v >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(v)
}
