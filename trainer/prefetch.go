package trainer

import (
	"context"
	"time"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/feed"
	"github.com/voxtrain/voxtrain/nn"
)

// prefetcher keeps one batch ahead of the step: while step i computes,
// batch i+1 is taken from the data stream (the time that takes is the
// device waiting for data) and its host→device copy is queued on the
// feeder's copy stream, to run under step i (see package feed).
type prefetcher struct {
	batches *data.BatchStream
	feeder  *feed.Feeder
	next    fetched
	// keepSamples copies each batch's sample list into fetched (tests).
	keepSamples bool
}

// fetched is a batch taken from the data stream and handed to the feeder.
type fetched struct {
	batch       *feed.Batch
	epoch, step int
	wait        time.Duration // spent waiting for the data stream
	err         error
	samples     []data.Sample // with keepSamples
	// unknown is each sample's unknown classes (data.Batch.Unknown),
	// copied: the host batch goes back to its ring before the step ends.
	unknown []uint8
}

func newPrefetcher(batches *data.BatchStream, dev nn.Device) *prefetcher {
	return &prefetcher{batches: batches, feeder: feed.New(dev, feed.Options{})}
}

// fetch takes the next batch from the data stream and queues its upload.
func (p *prefetcher) fetch(ctx context.Context) {
	t0 := time.Now()
	hb, err := p.batches.Next(ctx)
	p.next = fetched{wait: time.Since(t0), err: err}
	if err != nil {
		return
	}
	p.next.epoch, p.next.step = hb.Epoch, hb.Step
	p.next.unknown = append([]uint8(nil), hb.Unknown...)
	if p.keepSamples {
		p.next.samples = append([]data.Sample(nil), hb.Samples...)
	}
	if p.next.batch, p.next.err = p.feeder.Upload(hb); p.next.err != nil {
		hb.Release()
	}
}

// take returns the batch fetched last, leaving none ready (fetch again
// for the next step).
func (p *prefetcher) take() fetched {
	f := p.next
	p.next = fetched{}
	return f
}

// acquire makes the compute stream wait for b's copy and returns its
// device image and label.
func (p *prefetcher) acquire(b fetched) (image, label nn.Tensor) {
	return p.feeder.Acquire(b.batch)
}

// done marks b's step as issued (its device buffers may be refilled after
// it) and gives back the host buffers whose copies have completed.
func (p *prefetcher) done(b fetched) {
	p.feeder.Done(b.batch)
	p.feeder.Reap()
}

func (p *prefetcher) close() {
	p.feeder.Close()
	p.batches.Close()
}
