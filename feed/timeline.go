package feed

import (
	"time"

	"github.com/voxtrain/voxtrain/nn"
)

// interval is a span of device time, relative to the Feeder's origin.
type interval struct{ start, end time.Duration }

func (iv interval) len() time.Duration { return max(iv.end-iv.start, 0) }

// overlap returns how much of a lies inside b.
func overlap(a, b interval) time.Duration {
	return max(min(a.end, b.end)-max(a.start, b.start), 0)
}

// span returns the interval between two completed timed events.
func (f *Feeder) span(start, end nn.Event) (interval, bool) {
	s, err1 := f.tl.Elapsed(f.ref, start)
	e, err2 := f.tl.Elapsed(f.ref, end)
	if err1 != nil || err2 != nil {
		return interval{}, false
	}
	return interval{s, e}, true
}

// timeline accounts the copies and steps whose events have completed:
// each copy's device time and the part of it that ran under a step. Copy
// j can only overlap the steps of the batches before it that were still
// in a slot (j−Slots+1 … j−1): it waits for the step of batch j−Slots to
// free its slot, and step j waits for it. A copy is accounted once those
// steps are; the first copy (batch 0) is not counted, since no step can
// hide it.
func (f *Feeder) timeline() {
	if f.tl == nil {
		return
	}
	if f.stepIv == nil {
		f.stepIv = map[int64]interval{}
	}
	k := 0
	for _, b := range f.stepPending {
		if !b.stepEnd.Done() {
			f.stepPending[k] = b
			k++
			continue
		}
		if iv, ok := f.span(b.stepStart, b.stepEnd); ok {
			f.stepIv[b.Seq] = iv
			f.stats.StepTime += iv.len()
			f.stats.TimedSteps++
		}
	}
	clear(f.stepPending[k:])
	f.stepPending = f.stepPending[:k]

	n := int64(len(f.slots))
	k = 0
	for _, b := range f.timedCopies {
		ready := true
		for j := max(b.Seq-n+1, 0); j < b.Seq; j++ {
			if _, ok := f.stepIv[j]; !ok {
				ready = false
			}
		}
		if !ready {
			f.timedCopies[k] = b
			k++
			continue
		}
		// The first copy has nothing to hide under (the pipeline fills).
		if iv, ok := f.span(b.copyStart, b.copied); ok && b.Seq > 0 {
			var hidden time.Duration
			for j := max(b.Seq-n+1, 0); j < b.Seq; j++ {
				hidden += overlap(iv, f.stepIv[j])
			}
			hidden = min(hidden, iv.len())
			f.stats.Timed++
			f.stats.CopyTime += iv.len()
			f.stats.HiddenCopy += hidden
			f.stats.LastHidden = 1
			if iv.len() > 0 {
				f.stats.LastHidden = float64(hidden) / float64(iv.len())
			}
		}
		// Steps older than any copy still to account are no longer needed.
		for j := range f.stepIv {
			if j < b.Seq-n {
				delete(f.stepIv, j)
			}
		}
	}
	clear(f.timedCopies[k:])
	f.timedCopies = f.timedCopies[:k]
}
