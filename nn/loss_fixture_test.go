package nn_test

import (
	"math"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

// channelsLast uploads an NCDHW fixture tensor as an NDHWC device tensor.
func channelsLast(t *testing.T, dev nn.Device, h nn.HostTensor) nn.Tensor {
	s := h.Shape
	x := upload(t, dev, s, h.Data)
	defer dev.Free(x)
	y := dev.Alloc(nn.Shape{s[0], s[2], s[3], s[4], s[1]})
	dev.NCDHWToNDHWC(x, y)
	return y
}

// TestSoftSkeletonMatchesPyTorch compares the soft skeleton and its input
// gradient with the clDice reference code run by PyTorch.
func TestSoftSkeletonMatchesPyTorch(t *testing.T) {
	fx := testutil.ReadSafetensors(t, "testdata/losses.safetensors")
	dev := cpu.New(cpu.Options{})
	x := channelsLast(t, dev, fx["skel.input"])
	r := channelsLast(t, dev, fx["skel.weight"])
	skel := dev.Alloc(x.Shape())
	dev.SoftSkeleton(x, skel, 3, 0)
	if e := relErr(toNCDHW(t, dev, skel), fx["skel.output"].Data); e > 1e-6 {
		t.Errorf("skeleton: relative error %.2e", e)
	}
	dx := dev.Alloc(x.Shape())
	dev.SoftSkeletonBackward(x, r, dx, 3, 0)
	if e := relErr(toNCDHW(t, dev, dx), fx["skel.grad"].Data); e > 1e-6 {
		t.Errorf("skeleton gradient: relative error %.2e", e)
	}
}

// TestClDiceMatchesPyTorch checks 0.5·Dice + 0.5·clDice and its logit
// gradient through the Criterion.
func TestClDiceMatchesPyTorch(t *testing.T) {
	fx := testutil.ReadSafetensors(t, "testdata/losses.safetensors")
	dev := cpu.New(cpu.Options{})
	logits := channelsLast(t, dev, fx["cldice.logits"])
	lab := fx["cldice.labels"]
	labels := upload(t, dev, lab.Shape, lab.Data)
	c, err := nn.NewCriterion(dev, loss("cldice", nil), []nn.Shape{logits.Shape()})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Compute([]nn.Tensor{logits}, labels)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(fx["cldice.loss"].Data[0]); math.Abs(v.Total-want) > 1e-5*math.Abs(want) {
		t.Errorf("loss %.7f, PyTorch %.7f", v.Total, want)
	}
	if want := float64(fx["cldice.cl"].Data[0]); math.Abs(v.ClDice-want) > 1e-5*math.Abs(want) {
		t.Errorf("clDice term %.7f, PyTorch %.7f", v.ClDice, want)
	}
	if e := relErr(toNCDHW(t, dev, c.Grads()[0]), fx["cldice.grad"].Data); e > 1e-4 {
		t.Errorf("gradient: relative error %.2e", e)
	}
}

// TestBCEMatchesPyTorch checks BCEWithLogits(pos_weight=3) and its gradient.
func TestBCEMatchesPyTorch(t *testing.T) {
	fx := testutil.ReadSafetensors(t, "testdata/losses.safetensors")
	dev := cpu.New(cpu.Options{})
	logits := channelsLast(t, dev, fx["bce.logits"])
	lab := fx["bce.labels"]
	labels := upload(t, dev, lab.Shape, lab.Data)
	c, err := nn.NewCriterion(dev, loss("bce", func(l *config.Loss) { l.PosWeight = 3 }), []nn.Shape{logits.Shape()})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Compute([]nn.Tensor{logits}, labels)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(fx["bce.loss"].Data[0]); math.Abs(v.Total-want) > 1e-6*math.Abs(want) {
		t.Errorf("loss %.7f, PyTorch %.7f", v.Total, want)
	}
	if e := relErr(toNCDHW(t, dev, c.Grads()[0]), fx["bce.grad"].Data); e > 1e-5 {
		t.Errorf("gradient: relative error %.2e", e)
	}
}
