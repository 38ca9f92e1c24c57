// Package checkpoint saves and loads training checkpoints so that a crash,
// a SIGKILL or a preemption at any moment leaves the previous checkpoint
// intact, and lays out the run directory they live in.
//
// # Run directory
//
// RunDirAt names the paths of a run, RunDir.Lock creates the directory
// and its lock file, MkdirAll (or NewRunDir) its subdirectories:
//
//	<output>/<experiment>/
//	    splits_final.json  generated folds, shared by the experiment's runs
//	                       (written by data.Setup; see config.Data.SplitsFile)
//	<output>/<experiment>/fold_<k>/run_<r>/
//	    config.yaml      the resolved config (written by the trainer)
//	    train.log        the log
//	    metrics.jsonl    one JSON line per epoch
//	    checkpoints/     see below
//	    logs/            other logs (profiles, worker logs)
//	    plots/           curves drawn by `train plot`
//	    tensorboard/     TensorBoard event files (logging.tensorboard)
//	    train.lock       the lock a training holds (see below)
//
// # Lock
//
// RunDir.Lock takes an exclusive flock(2) on train.lock, so one training at
// a time writes into a run directory: a second one gets a *LockedError
// naming the holder's PID, host and start time, which the holder writes
// into the file. The kernel releases the lock when the holder exits, even
// by SIGKILL, so the file a killed training leaves behind blocks nobody;
// the file's content is a message, not the lock. Reading a run
// (validation, prediction, plots) takes no lock. On a filesystem without
// locks (Lustre without -o flock, for one) Lock holds nothing and says so
// in RunLock.Warning. The trainer takes the lock before anything else and
// writes nothing else into the directory until its checks have passed.
//
// The checkpoint directory is created again (MkdirAll) before every save,
// so a run whose output directory did not exist, or whose checkpoints/ was
// deleted mid-run, still saves.
//
// # Checkpoint layout
//
// Each save is one directory in checkpoints/:
//
//	checkpoints/
//	    ckpt-e0005-s000000500/     epoch 5, step 500
//	        model.safetensors      weights only, PyTorch names and shapes, F32
//	        optimizer.safetensors  optimiser state (e.g. momentum buffers), F32
//	        state.json             the trainer's state: epoch, step, schedule,
//	                               RNG and data cursor, ... (opaque JSON here)
//	        config.yaml            the resolved config (when given)
//	        manifest.json          written last: epoch, step, metric, version,
//	                               and each file's size and CRC-32C
//	    last -> ckpt-e0005-s000000500   the newest save
//	    best -> ckpt-e0004-s000000400   the best validation metric so far
//
// model.safetensors loads in Python with safetensors alone:
//
//	model.load_state_dict(safetensors.torch.load_file("checkpoints/last/model.safetensors"))
//
// # Atomicity
//
// A save writes every file into a temporary directory
// (checkpoints/.tmp-*), fsyncs each file and the directory, renames the
// directory to its final, unique name and fsyncs checkpoints/. A checkpoint
// directory under a final name is therefore always complete; one killed
// mid-save leaves only a .tmp-* directory, removed by the next save. The
// last and best pointers are symbolic links (relative, so a run directory
// can be moved), replaced atomically by renaming a new link over the old;
// on a filesystem without symbolic links they are small files holding the
// directory's name, replaced the same way. They are updated only after the
// directory they name is complete, so they never point at a partial save.
//
// Pruning renames a checkpoint to checkpoints/.trash-* (atomic) before
// deleting its files, so a crash while deleting never leaves a half-removed
// checkpoint under a final name. Pruning keeps: the KeepRecent newest saves
// (default 2, so a newest save damaged later, e.g. by a bad disk, still has
// a recent predecessor), the targets of last and best, and the newest Keep
// snapshots (saves at the end of every EveryEpochs-th epoch).
//
// SIGKILL leaves the page cache intact, so the fsyncs matter only for power
// loss and kernel crashes; they are there for those.
//
// # Loading
//
// Load takes a checkpoint directory, a last/best pointer, a model.safetensors
// inside a checkpoint, a torch.save file of a state_dict (.pt, .pth: read by
// checkpoint/torchpt, no Python), or a bare .safetensors file of weights (e.g. exported
// from PyTorch). LoadLatest ("auto") picks the newest complete checkpoint of
// a run; when it is damaged (truncated, CRC mismatch, unparsable) it falls
// back to the next newest and reports the skipped ones in Loaded.Skipped.
// Both check the tensors' names and shapes against the caller's before
// filling anything and report differences as a *MismatchError naming the
// file. Weights stored as F16, BF16 or F64 are converted to float32.
//
// LoadMatching (fine-tuning) takes the same paths but loads only the
// tensors whose name and shape match, and reports the rest (missing,
// mismatched with both shapes, unused) with the file it read and its
// SHA-256, for the caller to refuse or to keep their fresh values.
// Asking Load for the optimiser state of a bare weights file is an error
// wrapping ErrBareWeights.
//
// One process saves into a run's checkpoints/ at a time: the saver does
// not lock it; a training holds the run directory's lock (above).
package checkpoint
