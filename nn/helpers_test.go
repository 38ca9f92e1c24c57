package nn_test

import "github.com/voxtrain/voxtrain/config"

// with returns v changed by mod (nil: unchanged).
func with[T any](v T, mod func(*T)) T {
	if mod != nil {
		mod(&v)
	}
	return v
}

// model is the default model section with these features and mod's changes.
func model(features []int, mod func(*config.Model)) config.Model {
	m := config.Default().Model
	m.Features = features
	return with(m, mod)
}

// loss is the default loss section named name, with mod's changes.
func loss(name string, mod func(*config.Loss)) config.Loss {
	l := config.Default().Loss
	l.Name = name
	return with(l, mod)
}

// optim is the default optimiser section named name, with mod's changes.
func optim(name string, mod func(*config.Optim)) config.Optim {
	o := config.Default().Optim
	o.Name = name
	return with(o, mod)
}
