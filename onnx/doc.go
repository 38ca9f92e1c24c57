// Package onnx writes voxtrain's U-Net as an ONNX model (ExportUNet), so
// that a trained network runs in onnxruntime, TensorRT, OpenVINO or any
// other ONNX runtime without voxtrain.
//
// The protobuf encoding is written by hand (wire.go: varints, fixed
// floats, length-delimited fields) for the few ONNX messages an inference
// graph of plain operators needs (model.go), with a minimal strict reader
// for the same subset (decode.go) that the tests and `train export`'s
// users can check files with. Field numbers are those of onnx.proto
// (github.com/onnx/onnx, onnx/onnx.proto), stable across ONNX releases.
//
// # The exported graph
//
// Input "input" is float32 (N, C, D, H, W), channels first as in PyTorch,
// preprocessed as in training (the data section's normalisation and
// spacing); N, D, H and W are dynamic. Each spatial size must be a
// multiple of the product of the strides along that axis (metadata key
// voxtrain.spatial_multiple), as in voxtrain itself: otherwise the
// upsampled decoder features and the skip connection differ in size and
// the Concat fails. Output "logits" is float32 (N, K, D, H, W), the
// full-resolution head only — the output inference uses; deep
// supervision's lower-resolution heads serve the training loss and are
// left out. Softmax over axis 1 (or a sigmoid for a one-class model)
// gives the probabilities, argmax the labels.
//
// Every layer maps to one standard operator of opset 17: Conv,
// InstanceNormalization (with the affine scale and bias), LeakyRelu or
// Relu, ConvTranspose and Concat (axis 1, upsampled features first, then
// the skip connection, as voxtrain concatenates); a residual encoder's
// blocks (model.encoder: residual) add AveragePool (window = stride) and
// Add for their skips. Weights are stored in
// PyTorch's layouts, which are ONNX's — Conv (O, I, kD, kH, kW),
// ConvTranspose (I, O, kD, kH, kW) — converted from the device's
// channels-last layouts by nn.ExportParams, and named by their PyTorch
// state_dict keys.
package onnx
