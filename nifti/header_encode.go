package nifti

import (
	"encoding/binary"
	"fmt"
	"math"
)

// encode writes h as a NIfTI-1 or NIfTI-2 header (h.Version) in h.ByteOrder,
// with the single-file or pair magic. voxOffset is the value to store.
func (h *Header) encode(pair bool, voxOffset int64) ([]byte, error) {
	o := h.ByteOrder
	if o == nil {
		o = binary.LittleEndian
	}
	switch h.Version {
	case 1, 0:
		return h.encode1(o, pair, voxOffset)
	case 2:
		return h.encode2(o, pair, voxOffset), nil
	}
	return nil, fmt.Errorf("nifti: header version %d, want 1 or 2", h.Version)
}

func putStr(dst []byte, s string) { copy(dst, s) }

func (h *Header) encode1(o binary.ByteOrder, pair bool, voxOffset int64) ([]byte, error) {
	b := make([]byte, Nifti1HeaderSize)
	p16 := func(off int, v int64) { o.PutUint16(b[off:], uint16(int16(v))) }
	pf := func(off int, v float64) { o.PutUint32(b[off:], math.Float32bits(float32(v))) }
	for i, d := range h.Dim {
		if d > math.MaxInt16 || d < math.MinInt16 {
			return nil, fmt.Errorf("nifti: dim[%d] = %d does not fit NIfTI-1 (int16); write NIfTI-2", i, d)
		}
	}
	o.PutUint32(b[0:], Nifti1HeaderSize)
	b[38] = 'r' // "regular", as nibabel writes
	b[39] = h.DimInfo
	for i := 0; i < 8; i++ {
		p16(40+2*i, h.Dim[i])
		pf(76+4*i, h.Pixdim[i])
	}
	pf(56, h.IntentP1)
	pf(60, h.IntentP2)
	pf(64, h.IntentP3)
	p16(68, int64(h.IntentCode))
	p16(70, int64(h.Datatype))
	p16(72, int64(h.Datatype.Size()*8))
	p16(74, h.SliceStart)
	o.PutUint32(b[144:], uint32(h.Glmin))
	pf(108, float64(voxOffset))
	pf(112, h.SclSlope)
	pf(116, h.SclInter)
	p16(120, h.SliceEnd)
	b[122] = byte(h.SliceCode)
	b[123] = h.XYZTUnits
	pf(124, h.CalMax)
	pf(128, h.CalMin)
	pf(132, h.SliceDuration)
	pf(136, h.Toffset)
	putStr(b[148:227], h.Descrip)
	putStr(b[228:251], h.AuxFile)
	p16(252, int64(h.QformCode))
	p16(254, int64(h.SformCode))
	pf(256, h.QuaternB)
	pf(260, h.QuaternC)
	pf(264, h.QuaternD)
	pf(268, h.QoffsetX)
	pf(272, h.QoffsetY)
	pf(276, h.QoffsetZ)
	for r := 0; r < 3; r++ {
		for c := 0; c < 4; c++ {
			pf(280+16*r+4*c, h.Srow[r][c])
		}
	}
	putStr(b[328:343], h.IntentName)
	if pair {
		copy(b[344:], magic1Pair)
	} else {
		copy(b[344:], magic1Single)
	}
	return b, nil
}

func (h *Header) encode2(o binary.ByteOrder, pair bool, voxOffset int64) []byte {
	b := make([]byte, Nifti2HeaderSize)
	p64 := func(off int, v int64) { o.PutUint64(b[off:], uint64(v)) }
	pf := func(off int, v float64) { o.PutUint64(b[off:], math.Float64bits(v)) }
	o.PutUint32(b[0:], Nifti2HeaderSize)
	if pair {
		copy(b[4:], magic2Pair)
	} else {
		copy(b[4:], magic2Single)
	}
	o.PutUint16(b[12:], uint16(h.Datatype))
	o.PutUint16(b[14:], uint16(h.Datatype.Size()*8))
	for i := 0; i < 8; i++ {
		p64(16+8*i, h.Dim[i])
		pf(104+8*i, h.Pixdim[i])
	}
	pf(80, h.IntentP1)
	pf(88, h.IntentP2)
	pf(96, h.IntentP3)
	p64(168, voxOffset)
	pf(176, h.SclSlope)
	pf(184, h.SclInter)
	pf(192, h.CalMax)
	pf(200, h.CalMin)
	pf(208, h.SliceDuration)
	pf(216, h.Toffset)
	p64(224, h.SliceStart)
	p64(232, h.SliceEnd)
	putStr(b[240:319], h.Descrip)
	putStr(b[320:343], h.AuxFile)
	o.PutUint32(b[344:], uint32(h.QformCode))
	o.PutUint32(b[348:], uint32(h.SformCode))
	pf(352, h.QuaternB)
	pf(360, h.QuaternC)
	pf(368, h.QuaternD)
	pf(376, h.QoffsetX)
	pf(384, h.QoffsetY)
	pf(392, h.QoffsetZ)
	for r := 0; r < 3; r++ {
		for c := 0; c < 4; c++ {
			pf(400+32*r+8*c, h.Srow[r][c])
		}
	}
	o.PutUint32(b[496:], uint32(h.SliceCode))
	o.PutUint32(b[500:], uint32(h.XYZTUnits))
	o.PutUint32(b[504:], uint32(h.IntentCode))
	putStr(b[508:523], h.IntentName)
	b[524] = h.DimInfo
	return b
}
