package nn_test

import "github.com/voxtrain/voxtrain/config"

// model is the default model section with these features and mod's
// changes (nil: none).
func model(features []int, mod func(*config.Model)) config.Model {
	m := config.Default().Model
	m.Features = features
	if mod != nil {
		mod(&m)
	}
	return m
}

// loss is the default loss section named name, with mod's changes.
func loss(name string, mod func(*config.Loss)) config.Loss {
	l := config.Default().Loss
	l.Name = name
	if mod != nil {
		mod(&l)
	}
	return l
}

// optim is the default optimiser section named name, with mod's changes.
func optim(name string, mod func(*config.Optim)) config.Optim {
	o := config.Default().Optim
	o.Name = name
	if mod != nil {
		mod(&o)
	}
	return o
}
