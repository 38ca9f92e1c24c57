package devcheck

import "github.com/voxtrain/voxtrain/config"

// Model is the default model section with these features, classes and
// deep supervision: the U-Nets the GPU checks train.
func Model(features []int, classes int, deepSupervision bool) config.Model {
	m := config.Default().Model
	m.Features, m.NumClasses, m.DeepSupervision = features, classes, deepSupervision
	return m
}

// Loss is the default loss section named name, with batch Dice or not.
func Loss(name string, batchDice bool) config.Loss {
	l := config.Default().Loss
	l.Name, l.BatchDice = name, batchDice
	return l
}

// Optim is the default optimiser section named name (sgd: lr 0.01, as
// nnU-Net; adamw: lr 1e-3).
func Optim(name string) config.Optim {
	o := config.Default().Optim
	o.Name = name
	return o
}
