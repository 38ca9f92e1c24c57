// Package jsonfloat is a float64 for JSON files that must stay valid when a
// value is NaN or infinite (a Dice of a class absent from every case, the
// statistics of an empty image): such values are written as null, and null
// reads back as NaN. encoding/json refuses NaN and ±Inf outright.
package jsonfloat

import (
	"encoding/json"
	"math"
)

// Float is a float64 written as JSON null when NaN or infinite.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

// UnmarshalJSON implements json.Unmarshaler; null reads as NaN.
func (f *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = Float(math.NaN())
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}
