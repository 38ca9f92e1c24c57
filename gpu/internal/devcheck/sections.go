package devcheck

import "github.com/voxtrain/voxtrain/config"

// Model is the default model section with these features, classes and
// deep supervision: the U-Nets the GPU checks train.
func Model(features []int, classes int, deepSupervision bool) config.Model {
	m := config.Default().Model
	m.Features, m.NumClasses, m.DeepSupervision = features, classes, deepSupervision
	return m
}

// ResidualModel is Model with nnU-Net's residual encoder (ResEnc): blocks
// residual blocks per level, one decoder conv per stage, as nnU-Net's
// ResEnc presets. With features that double, each level's first block
// has a pooled projection in its skip; a repeated width gives a skip that
// pools only.
func ResidualModel(features []int, classes int, deepSupervision bool, blocks []int) config.Model {
	m := Model(features, classes, deepSupervision)
	m.Encoder, m.BlocksPerLevel, m.DecoderConvs = config.EncoderResidual, blocks, 1
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
