// Package trainer is voxtrain's training loop, shaped like nnU-Net's
// run_training: a run starts (onTrainStart), then every epoch starts
// (onEpochStart), takes its steps (trainStep) and ends (onEpochEnd:
// metrics, validation, checkpoint), and the run ends (onTrainEnd). Each
// concern is one small type in its own file:
//
//	run.go          Run: the entry point, its Options and Result
//	setup.go        what a run builds before its first step
//	loop.go         the loop and its hooks
//	prefetch.go     the double-buffered fetch → upload of batches
//	clock.go        timing of data wait, copy, compute, validation; ETA
//	checkpoints.go  saving and resuming (exact, from the data cursor)
//	validate.go     patch and sliding-window validation
//	console.go      the progress display and train.log
//	state.go        the training state saved beside the weights
//
// The next batch is copied to the device while the current one computes;
// the split of wall time into data-wait, host→device copy, compute and
// validation is recorded per epoch; checkpoints are always whole; resume is
// exact; SIGINT/SIGTERM (a cancelled context) finish the step and save.
package trainer
