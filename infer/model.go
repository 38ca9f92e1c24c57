package infer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/nn"
)

// Model is a trained U-Net loaded from a checkpoint, with the config it
// was trained with, ready for sliding-window prediction.
type Model struct {
	Config *config.Config
	Dir    string // the checkpoint loaded
	net    *nn.UNet
	dnet   *DeviceNet
}

// checkpointDir resolves what LoadModel accepts (a checkpoint directory, a
// last/best pointer, or the model.safetensors inside one) to the
// directory holding config.yaml.
func checkpointDir(path string) (string, error) {
	path, err := checkpoint.Dir(path)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(path, "config.yaml")); err != nil {
		return "", fmt.Errorf("checkpoint %s: no config.yaml beside the weights (give a checkpoint directory saved by train, or its last/best pointer)", path)
	}
	return path, nil
}

// LoadModel builds the model of the checkpoint at path on dev and loads
// its weights. Inference runs batches of batch patches (0: the training
// batch size).
func LoadModel(path string, dev nn.Device, batch int) (*Model, error) {
	net, cfg, dir, err := loadNet(path, dev)
	if err != nil {
		return nil, err
	}
	if batch <= 0 {
		batch = cfg.Train.BatchSize
	}
	dnet, err := NewDeviceNet(net, batch, cfg.Train.PatchSize)
	if err != nil {
		net.Free()
		return nil, err
	}
	return &Model{Config: cfg, Dir: dir, net: net, dnet: dnet}, nil
}

// LoadNet builds the U-Net of the checkpoint at path (what LoadModel
// accepts) on dev with its weights, and returns it with the config it was
// trained with: LoadModel without the inference buffers, for a caller that
// wants the network itself (train export). The caller frees the net.
func LoadNet(path string, dev nn.Device) (*nn.UNet, *config.Config, error) {
	net, cfg, _, err := loadNet(path, dev)
	return net, cfg, err
}

// loadNet is LoadNet, also returning the checkpoint directory.
func loadNet(path string, dev nn.Device) (*nn.UNet, *config.Config, string, error) {
	dir, err := checkpointDir(path)
	if err != nil {
		return nil, nil, "", err
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	text, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, nil, "", fmt.Errorf("checkpoint: %w", err)
	}
	cfg, err := config.Parse(text, cfgPath, "")
	if err != nil {
		return nil, nil, "", err
	}
	// Inference takes the model, the data section's preprocessing and the
	// training patch; the rest of the file (a run's, maybe written by an
	// older version) is not its business.
	if err := errors.Join(cfg.Model.Validate(), cfg.Data.Validate()); err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", cfgPath, err)
	}
	if p := cfg.Train.PatchSize; p[0] < 1 || p[1] < 1 || p[2] < 1 || cfg.Train.BatchSize < 1 {
		return nil, nil, "", fmt.Errorf("%s: train.patch_size %v, train.batch_size %d: want positive sizes", cfgPath, p, cfg.Train.BatchSize)
	}
	net, err := nn.NewUNet(dev, cfg.Model, cfg.Seed)
	if err != nil {
		return nil, nil, "", err
	}
	params, err := nn.ExportParams(dev, net.Params())
	if err != nil {
		net.Free()
		return nil, nil, "", err
	}
	if _, err := checkpoint.Load(dir, params, nil); err != nil {
		net.Free()
		return nil, nil, "", err
	}
	if err := nn.ImportParams(dev, net.Params(), params); err != nil {
		net.Free()
		return nil, nil, "", fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	return net, cfg, dir, nil
}

// Close releases the model's device memory.
func (m *Model) Close() {
	m.dnet.Free()
	m.net.Free()
}

// PredictFile segments the image file(s) (one per channel, or one 4D file)
// and writes the labels to output as uint8 with the first input's header:
// dimensions, voxel sizes, qform and sform unchanged, so viewers (ITK-SNAP,
// 3D Slicer, FSLeyes) overlay it on the input.
//
// The output is checked first (CheckOutput): a bad name or an unwritable
// folder is an error before minutes of inference, not after.
func (m *Model) PredictFile(ctx context.Context, inputs []string, output string, vc config.Validation) error {
	if len(inputs) == 0 {
		return errors.New("predict: no input image")
	}
	if err := CheckOutput(output, inputs); err != nil {
		return fmt.Errorf("predict: output %w", err)
	}
	v, err := data.ReadCase(m.Config.Data, data.Case{ID: filepath.Base(inputs[0]), Images: inputs}, 0)
	if err != nil {
		return err
	}
	// On the input's grid even when data.target_spacing resampled it or
	// data.crop_to_nonzero cropped it.
	x, err := m.predictExported(ctx, v, vc, false)
	if err != nil {
		return fmt.Errorf("predict %s: %w", inputs[0], err)
	}
	return WriteLabels(output, inputs[0], x.labels)
}
