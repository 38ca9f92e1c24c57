package nn

import "github.com/voxtrain/voxtrain/config"

// slope returns the activation's negative slope (1 = identity).
func slope(c config.Model) float32 {
	switch c.Nonlinearity {
	case "relu":
		return 0
	case "none":
		return 1
	}
	return float32(c.NegativeSlope)
}
