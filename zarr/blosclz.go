package zarr

import "errors"

var errBlosclz = errors.New("blosclz: corrupt stream")

// blosclzDecompress decodes a blosclz stream (blosc's own LZ77 codec, a
// FastLZ descendant) into dst, which must be exactly the decoded size.
//
// A token's top three bits are a match length (0: a run of ctrl+1
// literals follows); a match's low five bits and the next byte are its
// distance, with 16 more bits when both are all ones. A valid stream never
// ends on a match: blosc's decoder stops before copying one, and so does
// this one (the block is then short, which is an error).
func blosclzDecompress(src, dst []byte) error {
	if len(src) == 0 {
		if len(dst) == 0 {
			return nil
		}
		return errBlosclz
	}
	const maxDistance = 8191
	ip, op := 0, 0
	ctrl := int(src[ip] & 31)
	ip++
	for {
		if ctrl >= 32 {
			length := ctrl>>5 - 1
			ofs := (ctrl & 31) << 8
			if length == 6 {
				for {
					if ip+1 >= len(src) {
						return errBlosclz
					}
					code := int(src[ip])
					ip++
					length += code
					if code != 255 {
						break
					}
				}
			} else if ip+1 >= len(src) {
				return errBlosclz
			}
			code := int(src[ip])
			ip++
			length += 3
			ref := op - ofs - code
			if code == 255 && ofs == 31<<8 {
				if ip+1 >= len(src) {
					return errBlosclz
				}
				ofs = int(src[ip])<<8 | int(src[ip+1])
				ip += 2
				ref = op - ofs - maxDistance
			}
			if op+length > len(dst) || ref-1 < 0 {
				return errBlosclz
			}
			if ip >= len(src) {
				break
			}
			ctrl = int(src[ip])
			ip++
			ref--
			// Byte by byte: a match may overlap what it writes.
			for i := range length {
				dst[op+i] = dst[ref+i]
			}
			op += length
		} else {
			ctrl++
			if op+ctrl > len(dst) || ip+ctrl > len(src) {
				return errBlosclz
			}
			copy(dst[op:], src[ip:ip+ctrl])
			op += ctrl
			ip += ctrl
			if ip >= len(src) {
				break
			}
			ctrl = int(src[ip])
			ip++
		}
	}
	if op != len(dst) {
		return errBlosclz
	}
	return nil
}
