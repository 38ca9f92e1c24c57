// Package torchpt reads the tensors of a PyTorch state_dict saved with
// torch.save (the zip format PyTorch writes since 1.6: ARCHIVE/data.pkl,
// a pickle whose tensors name their storages ARCHIVE/data/KEY) — the
// weights of `torch.save(model.state_dict(), "x.pt")`, or of a
// checkpoint dict holding one ("state_dict", "model_state_dict",
// "network_weights" as nnU-Net's checkpoint_final.pth, "model", ...).
//
// It runs no Python: the pickle is read by a small machine that knows
// the opcodes torch.save writes and builds plain values, calling nothing
// (an unknown class is kept as a name). Only the tensors are returned,
// as safetensors.Tensor values in the file's order, each made
// contiguous, in its own dtype; a malformed or truncated file is an
// error naming it, never a panic. The legacy (pre-1.6, non-zip) format
// and big-endian files are refused with the reason.
package torchpt

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strings"

	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
)

// Magic is how a torch.save file (a zip) begins.
var Magic = []byte("PK\x03\x04")

// stateDictKeys are the keys under which checkpoints keep their model's
// state_dict, tried in this order when the top object is not one itself.
var stateDictKeys = []string{"state_dict", "model_state_dict", "network_weights", "model", "net", "weights", "module"}

// maxPickle bounds data.pkl (the pickle holds names and shapes, not the
// tensors' data: megabytes at most).
const maxPickle = 256 << 20

// Read returns the tensors of the state_dict in the torch.save file r
// (size bytes; name is used in errors).
func Read(r io.ReaderAt, size int64, name string) ([]safetensors.Tensor, error) {
	f, err := ReadFile(r, size, name)
	if err != nil {
		return nil, err
	}
	return f.Tensors, nil
}

// File is what ReadFile finds in a torch.save file.
type File struct {
	// Tensors are the state_dict's, in the file's order.
	Tensors []safetensors.Tensor
	// Numbers are the top-level dict's int and float values by key (a
	// training checkpoint's current_epoch, nnU-Net's _best_ema), when the
	// state_dict is one of its values.
	Numbers map[string]float64
}

// ReadFile reads the state_dict in the torch.save file r, as Read, and
// the numbers beside it.
func ReadFile(r io.ReaderAt, size int64, name string) (*File, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		var head [4]byte
		if n, _ := r.ReadAt(head[:], 0); n == 4 && head[0] == 0x80 {
			return nil, fmt.Errorf("%s: a legacy torch.save file (PyTorch before 1.6, or _use_new_zipfile_serialization=False): save it again with a current PyTorch", name)
		}
		return nil, fmt.Errorf("%s: not a torch.save file: %w", name, err)
	}
	files := map[string]*zip.File{}
	var pkl *zip.File
	for _, f := range zr.File {
		files[f.Name] = f
		if path.Base(f.Name) == "data.pkl" && strings.Count(f.Name, "/") == 1 {
			if pkl != nil {
				return nil, fmt.Errorf("%s: two data.pkl (%s, %s)", name, pkl.Name, f.Name)
			}
			pkl = f
		}
	}
	if pkl == nil {
		return nil, fmt.Errorf("%s: no ARCHIVE/data.pkl: a zip, but not one torch.save wrote", name)
	}
	prefix := path.Dir(pkl.Name)
	if f := files[prefix+"/byteorder"]; f != nil {
		b, err := readEntry(f, 16)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, f.Name, err)
		}
		if s := strings.TrimSpace(string(b)); s != "little" {
			return nil, fmt.Errorf("%s: byte order %q: only little-endian files are read", name, s)
		}
	}
	b, err := readEntry(pkl, maxPickle)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", name, pkl.Name, err)
	}
	top, err := unpickle(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", name, pkl.Name, err)
	}
	sd, err := stateDict(top)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	numbers := map[string]float64{}
	if d, ok := top.(*dict); ok && d != sd {
		for i, k := range d.keys {
			key, ok := k.(string)
			if !ok {
				continue
			}
			switch v := d.vals[i].(type) {
			case int64:
				numbers[key] = float64(v)
			case float64:
				numbers[key] = v
			case *object:
				// numpy.float64 and the like: a scalar of a dtype and its
				// bytes (numpy.core.multiarray.scalar(dtype, bytes)).
				if x, ok := numpyScalar(v); ok {
					numbers[key] = x
				}
			}
		}
	}
	var out []safetensors.Tensor
	data := map[string][]byte{}
	// The copies may total a few times the storages (tensors tied to one
	// storage, views of a flat buffer), never more: a hostile pickle naming
	// one large storage from thousands of tensors is refused.
	var stored, copied int64
	for i, k := range sd.keys {
		key, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("%s: a state_dict key %v that is not a string", name, k)
		}
		t, ok := sd.vals[i].(*tensor)
		if !ok {
			continue // a non-tensor entry (a checkpoint's epoch, ...)
		}
		st := t.st
		raw, ok := data[st.key]
		if !ok {
			f := files[prefix+"/data/"+st.key]
			if f == nil {
				return nil, fmt.Errorf("%s: tensor %s: no storage %s/data/%s", name, key, prefix, st.key)
			}
			if raw, err = readEntry(f, int64(f.UncompressedSize64)); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", name, f.Name, err)
			}
			data[st.key] = raw
			stored += int64(len(raw))
		}
		tt, err := contiguous(key, t, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", name, key, err)
		}
		if copied += int64(len(tt.Data)); copied > 4*stored+1<<20 {
			return nil, fmt.Errorf("%s: the tensors total %d bytes, more than 4 times their storages' %d", name, copied, stored)
		}
		out = append(out, tt)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: the state_dict holds no tensor", name)
	}
	return &File{Tensors: out, Numbers: numbers}, nil
}

// numpyScalar reads numpy.core.multiarray.scalar(dtype('f8' or 'f4'),
// bytes), as a numpy.float64 is pickled; ok is false for anything else.
func numpyScalar(o *object) (float64, bool) {
	if !strings.HasSuffix(o.fn.module, "multiarray") || o.fn.name != "scalar" || len(o.args) != 2 {
		return 0, false
	}
	dt, ok := o.args[0].(*object)
	if !ok || dt.fn.name != "dtype" || len(dt.args) == 0 {
		return 0, false
	}
	kind, _ := dt.args[0].(string)
	b, ok := o.args[1].([]byte) // protocol 2 writes them as _codecs.encode, which call turns into bytes
	switch {
	case !ok:
		return 0, false
	case kind == "f8" && len(b) == 8:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), true
	case kind == "f4" && len(b) == 4:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), true
	}
	return 0, false
}

// stateDict finds the dict of tensors: the top object itself, or the
// value of one of stateDictKeys.
func stateDict(top any) (*dict, error) {
	d, ok := top.(*dict)
	if !ok {
		if _, ok := top.(*tensor); ok {
			return nil, errors.New("holds one tensor, not a state_dict (save model.state_dict())")
		}
		return nil, fmt.Errorf("holds a %s, not a state_dict (save model.state_dict(), not the model)", kind(top))
	}
	if hasTensors(d) {
		return d, nil
	}
	for _, k := range stateDictKeys {
		if v, ok := d.get(k); ok {
			if sd, ok := v.(*dict); ok && hasTensors(sd) {
				return sd, nil
			}
		}
	}
	var keys []string
	for _, k := range d.keys {
		keys = append(keys, fmt.Sprint(k))
	}
	return nil, fmt.Errorf("no state_dict: a dict of keys %s, none of them (%s) a dict of tensors", strings.Join(keys, ", "), strings.Join(stateDictKeys, ", "))
}

func hasTensors(d *dict) bool {
	for _, v := range d.vals {
		if _, ok := v.(*tensor); ok {
			return true
		}
	}
	return false
}

func kind(v any) string {
	switch t := v.(type) {
	case *object:
		return "Python object of class " + t.fn.module + "." + t.fn.name
	case nil:
		return "None"
	}
	return fmt.Sprintf("%T", v)
}

// dtypes maps torch's storage classes to safetensors dtypes.
var dtypes = map[string]safetensors.DType{
	"FloatStorage": safetensors.F32, "DoubleStorage": safetensors.F64, "HalfStorage": safetensors.F16,
	"BFloat16Storage": safetensors.BF16, "LongStorage": safetensors.I64, "IntStorage": safetensors.I32,
	"ShortStorage": safetensors.I16, "CharStorage": safetensors.I8, "ByteStorage": safetensors.U8,
	"BoolStorage": safetensors.BOOL,
}

// contiguous gathers t's elements (its offset and strides into raw, the
// storage's bytes) into a row-major tensor of its own dtype.
func contiguous(name string, t *tensor, raw []byte) (safetensors.Tensor, error) {
	dt, ok := dtypes[t.st.dtype]
	if !ok {
		return safetensors.Tensor{}, fmt.Errorf("storage type %s is not one voxtrain reads", t.st.dtype)
	}
	es := int64(dt.Size())
	if t.st.numel > int64(len(raw))/es {
		return safetensors.Tensor{}, fmt.Errorf("storage %s holds %d bytes, fewer than its %d elements of %d bytes", t.st.key, len(raw), t.st.numel, es)
	}
	n := int64(1)
	last := t.offset // the largest element index the tensor reads
	shape := make([]int, len(t.shape))
	for i, s := range t.shape {
		if s > 0 && n > (1<<40)/s {
			return safetensors.Tensor{}, fmt.Errorf("size %v is too large", t.shape)
		}
		n *= s
		shape[i] = int(s)
		if s > 0 {
			if t.stride[i] > (1<<40)/s {
				return safetensors.Tensor{}, fmt.Errorf("stride %v is too large", t.stride)
			}
			last += (s - 1) * t.stride[i]
		}
	}
	if n > 0 && last >= t.st.numel {
		return safetensors.Tensor{}, fmt.Errorf("size %v, stride %v and offset %d reach past the storage's %d elements", t.shape, t.stride, t.offset, t.st.numel)
	}
	// A view with zero strides (an expanded tensor) would have more
	// elements than its storage: refused, so that the copy below is never
	// larger than the file's own data.
	if n > t.st.numel {
		return safetensors.Tensor{}, fmt.Errorf("size %v has %d elements, more than its storage's %d (an expanded view): save tensor.contiguous() instead", t.shape, n, t.st.numel)
	}
	out := make([]byte, n*es)
	idx := make([]int64, len(t.shape))
	for k := int64(0); k < n; k++ {
		src := t.offset
		for i := range idx {
			src += idx[i] * t.stride[i]
		}
		copy(out[k*es:(k+1)*es], raw[src*es:(src+1)*es])
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < t.shape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return safetensors.Tensor{Name: name, DType: dt, Shape: shape, Data: out}, nil
}

// readEntry reads a zip entry whole, refusing one larger than limit
// (and checking its checksum, as archive/zip does at its end).
func readEntry(f *zip.File, limit int64) ([]byte, error) {
	if f.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("%d bytes, more than the %d expected", f.UncompressedSize64, limit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, io.LimitReader(rc, limit+1)); err != nil {
		return nil, err
	}
	if int64(b.Len()) > limit {
		return nil, fmt.Errorf("more than %d bytes", limit)
	}
	return b.Bytes(), nil
}

// ToSafetensors converts the torch.save file at r into the bytes of a
// safetensors file holding the same tensors, so that what reads
// safetensors weights reads it.
func ToSafetensors(r io.ReaderAt, size int64, name string) ([]byte, error) {
	ts, err := Read(r, size, name)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := safetensors.Write(&b, ts, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b.Bytes(), nil
}
