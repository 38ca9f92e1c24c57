#!/usr/bin/env bash
# The adversarial pass of issue 17, repeatable: bad configs, bad data,
# damaged checkpoints, a full disk, signals and concurrent runs, each run
# against a freshly built `train` with a timeout. Each line of the result
# table is a case: its exit code, a flag (PANIC, HANG, UNEXPECTED-FAIL,
# ACCEPTED-BAD-INPUT) and the first lines of its error, which should name
# the file or config key. Run from anywhere:
#   scripts/adversarial/run.sh [WORKDIR]      (default /tmp/voxtrain-adversarial)
# Needs python3 (no packages) for the config and NIfTI edits; the full-disk
# case needs root to mount a tmpfs and is skipped otherwise.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/adversarial
W=${1:-/tmp/voxtrain-adversarial}
rm -rf $W; mkdir -p $W
T=$W/train
go -C $ROOT build -o $T ./cmd/train || exit 1
DEMO=$ROOT/testdata/demo
mkds() { # mkds DIR N : MSD subset with N cases (copies)
  local d=$1 n=$2; mkdir -p $d/imagesTr $d/labelsTr
  local ids=$(ls $DEMO/imagesTr | head -$n | sed 's/.nii.gz//')
  local tr=""
  for id in $ids; do cp $DEMO/imagesTr/$id.nii.gz $d/imagesTr/; cp $DEMO/labelsTr/$id.nii.gz $d/labelsTr/; tr="$tr{\"image\":\"./imagesTr/$id.nii.gz\",\"label\":\"./labelsTr/$id.nii.gz\"},"; done
  echo "{\"modality\":{\"0\":\"MRI\"},\"labels\":{\"0\":\"background\",\"1\":\"Anterior\",\"2\":\"Posterior\"},\"training\":[${tr%,}]}" > $d/dataset.json
}
mkcfg() { # mkcfg FILE DATASET [extra yaml appended]
  cat > $1 <<YAML
experiment: adv
seed: 1
device: cpu
output_dir: $W/runs
data:
  dataset: $2
  fold: 0
  num_folds: 5
  workers: 1
augment:
  preset: light
model:
  in_channels: 1
  num_classes: 3
  features: [4, 8]
train:
  epochs: 1
  iterations_per_epoch: 2
  batch_size: 1
  patch_size: [16, 16, 16]
validation:
  every: 1
  mode: patch
  iterations: 1
YAML
}
n=0
res=$W/results.tsv
: > $res
case_() { # case_ NAME EXPECT(ok|err|sig) TIMEOUT cmd...
  local name=$1 expect=$2 to=$3; shift 3
  n=$((n+1))
  timeout -s KILL $to "$@" > $W/c$n.out 2> $W/c$n.err
  local rc=$?
  local flag=""
  grep -q -E "^panic|goroutine [0-9]+ \[|SIGSEGV" $W/c$n.err $W/c$n.out && flag="PANIC"
  [ $rc = 137 ] && flag="HANG"
  if [ "$expect" = ok ] && [ $rc != 0 ]; then flag="$flag UNEXPECTED-FAIL"; fi
  if [ "$expect" = err ] && [ $rc = 0 ]; then flag="$flag ACCEPTED-BAD-INPUT"; fi
  printf "%d\t%s\trc=%s\t%s\t%s\n" $n "$name" $rc "$flag" "$(grep -v -E '^\s*$|^time=|^Usage|^  |^Flags|^Run ' $W/c$n.err | head -2 | tr '\n' ' ' | cut -c1-300)" >> $res
}
DS=$W/ds; mkds $DS 6
C=$W/base.yaml; mkcfg $C $DS
# --- configs
c() { mkcfg $W/$1.yaml $DS; python3 - "$W/$1.yaml" "$2" <<'PY'
import sys
p, edit = sys.argv[1], sys.argv[2]
s = open(p).read()
for pair in edit.split("||"):
    a, b = pair.split("=>")
    assert a in s, a
    s = s.replace(a, b.replace("\\n", "\n"))
open(p, "w").write(s)
PY
}
c unknownkey "  workers: 1=>  workers: 1\n  wrokers: 2";            case_ "unknown key" err 60 $T --config $W/unknownkey.yaml
c patchstr "patch_size: [16, 16, 16]=>patch_size: abc";           case_ "patch_size string" err 60 $T --config $W/patchstr.yaml
c patch2 "patch_size: [16, 16, 16]=>patch_size: [16, 16]";        case_ "patch_size 2 values" err 60 $T --config $W/patch2.yaml
c lrneg "seed: 1=>seed: 1\noptim:\n  lr: -0.1";                   case_ "negative lr" err 60 $T --config $W/lrneg.yaml
c nods "dataset: $DS=>dataset: /nonexistent/ds";                  case_ "dataset missing" err 60 $T --config $W/nods.yaml
c fold7 "fold: 0=>fold: 7";                                        case_ "fold 7 of 5" err 60 $T --config $W/fold7.yaml
c folds1 "num_folds: 5=>num_folds: 1";                            case_ "num_folds 1" err 60 $T --config $W/folds1.yaml
: > $W/empty.yaml;                                                 case_ "empty config" err 60 $T --config $W/empty.yaml
printf 'experiment: adv\n\tseed: 1\n' > $W/tab.yaml;               case_ "yaml tab" err 60 $T --config $W/tab.yaml
mkdir -p $W/cfgdir;                                                case_ "config is a dir" err 60 $T --config $W/cfgdir
c cuda "device: cpu=>device: cuda";                                case_ "cuda without gpu" err 60 $T --config $W/cuda.yaml
c wneg "workers: 1=>workers: -3";                                  case_ "workers -3" err 60 $T --config $W/wneg.yaml
c cache "workers: 1=>workers: 1\n  cache_bytes: lots";             case_ "cache_bytes lots" err 60 $T --config $W/cache.yaml
c feat0 "features: [4, 8]=>features: []";                         case_ "features empty" err 60 $T --config $W/feat0.yaml
c bs0 "batch_size: 1=>batch_size: 0";                              case_ "batch 0" err 60 $T --config $W/bs0.yaml
c loss "seed: 1=>seed: 1\nloss:\n  name: dice_focal";              case_ "loss unknown" err 60 $T --config $W/loss.yaml
c classes1 "num_classes: 3=>num_classes: 1";                       case_ "num_classes 1 vs labels 0..2" err 60 $T --config $W/classes1.yaml
c huge "patch_size: [16, 16, 16]=>patch_size: [4096, 4096, 4096]"; case_ "patch 4096^3" err 60 $T --config $W/huge.yaml
c inch "in_channels: 1=>in_channels: 2";                           case_ "in_channels 2 for 1-ch data" err 60 $T --config $W/inch.yaml
c ovs "workers: 1=>workers: 1\n  oversample_foreground: 1.5";     case_ "oversample 1.5" err 60 $T --config $W/ovs.yaml
c nan "seed: 1=>seed: 1\noptim:\n  lr: .nan";                       case_ "lr NaN" err 60 $T --config $W/nan.yaml
c ts000 "  workers: 1=>  workers: 1\n  target_spacing: [0, 0, 0]";   case_ "target_spacing all 0 (all kept)" err 60 $T --config $W/ts000.yaml
c ts0 "  workers: 1=>  workers: 1\n  target_spacing: [0, 1.5, 1.5]"; case_ "target_spacing [0, 1.5, 1.5] (slices kept)" ok 300 $T --config $W/ts0.yaml --run-id 21
# --- data
bad() { rm -rf $W/$1; mkds $W/$1 6; mkcfg $W/$1.yaml $W/$1; }
bad trunc; f=$(ls $W/trunc/labelsTr/*.gz | sed -n 3p); head -c 300 $f > $f.x && mv $f.x $f; case_ "truncated label gz" err 120 $T --config $W/trunc.yaml
bad empty; f=$(ls $W/empty/imagesTr/*.gz | sed -n 2p); : > $f;    case_ "empty image file" err 120 $T --config $W/empty.yaml
bad text; f=$(ls $W/text/imagesTr/*.gz | sed -n 2p); echo hello > $f; case_ "text as .nii.gz" err 120 $T --config $W/text.yaml
bad shape; a=$(ls $W/shape/labelsTr/*.gz | sed -n 1p); b=$(ls $W/shape/labelsTr/*.gz | sed -n 2p); cp $b $a; case_ "label of another case (shape)" err 120 $T --config $W/shape.yaml
bad json; echo '{"training": [' > $W/json/dataset.json;           case_ "dataset.json broken" err 60 $T --config $W/json.yaml
bad nolabel; rm $(ls $W/nolabel/labelsTr/*.gz | sed -n 4p);        case_ "label missing" err 60 $T --config $W/nolabel.yaml
bad loop; f=$(ls $W/loop/imagesTr/*.gz | sed -n 1p); rm $f; ln -s $f $f; case_ "symlink loop image" err 60 $T --config $W/loop.yaml
bad fifo; f=$(ls $W/fifo/imagesTr/*.gz | sed -n 1p); rm $f; mkfifo $f; c fifohard "workers: 1=>workers: 1\n  hard_timeout: 5s"; sed -i "s#dataset: $DS#dataset: $W/fifo#" $W/fifohard.yaml; case_ "fifo image + hard_timeout" err 90 $T --config $W/fifohard.yaml
bad small; python3 - $W/small/dataset.json <<'PY'
import json,sys; p=sys.argv[1]; d=json.load(open(p)); d["training"]=d["training"][:2]; json.dump(d,open(p,"w"))
PY
case_ "2 cases, 5 folds" err 60 $T --config $W/small.yaml
bad region; python3 - $W/region/dataset.json <<'PY'
import json,sys; p=sys.argv[1]; d=json.load(open(p)); d["labels"]={"background":0,"whole":[1,2]}; d["regions_class_order"]=[1]; json.dump(d,open(p,"w"))
PY
case_ "dataset.json regions" err 60 $T --config $W/region.yaml
# --- a good run to get a checkpoint
case_ "good run" ok 300 $T --config $C
CK=$W/runs/adv/fold_0/run_0/checkpoints
L=$(readlink -f $CK/last)
case_ "second run same dir, no resume" err 60 $T --config $C
cp -r $L $W/ckbad; head -c 1000 $L/model.safetensors > $W/ckbad/model.safetensors
case_ "predict w/ truncated weights" err 60 $T predict --checkpoint $W/ckbad --input $DS/imagesTr/$(ls $DS/imagesTr|head -1) --output $W/p.nii.gz
cp -r $L $W/cknocfg; rm $W/cknocfg/config.yaml
case_ "predict ckpt without config" err 60 $T predict --checkpoint $W/cknocfg --input $DS/imagesTr/$(ls $DS/imagesTr|head -1) --output $W/p.nii.gz
IMG=$DS/imagesTr/$(ls $DS/imagesTr|head -1)
case_ "predict out == in" err 60 $T predict --checkpoint $CK/last --input $IMG --output $IMG
case_ "predict out in missing dir" ok 60 $T predict --checkpoint $CK/last --input $IMG --output $W/newdir/sub/p.nii.gz
case_ "predict out .png" err 60 $T predict --checkpoint $CK/last --input $IMG --output $W/p.png
case_ "predict 2 inputs for 1-ch model" err 60 $T predict --checkpoint $CK/last --input $IMG --input $IMG --output $W/p2.nii.gz
case_ "predict label as image (uint8)" ok 60 $T predict --checkpoint $CK/last --input $DS/labelsTr/$(ls $DS/labelsTr|head -1) --output $W/p3.nii.gz
case_ "validate --fold 9" err 60 $T validate --checkpoint $CK/last --fold 9
case_ "validate --fold -1" err 60 $T validate --checkpoint $CK/last --fold -1
echo "not weights" > $W/w.safetensors
case_ "init-weights text file" err 60 $T --config $C --run-id 5 --init-weights $W/w.safetensors
case_ "export onnx to dir" err 60 $T export --checkpoint $CK/last --onnx $W
case_ "info on dir" err 30 $T info $W
case_ "info text file" err 30 $T info $W/base.yaml
case_ "plot missing run" err 30 $T plot $W/nonexistent
case_ "resume auto (finished run)" ok 120 $T --config $C --resume auto
case_ "--final-validation bogus" err 60 $T --config $C --resume auto --final-validation bogus
case_ "final validation of the finished run (--npz)" ok 300 $T --config $C --resume auto --npz
case_ "find-best: folds 1-4 not validated" err 60 $T find-best --cv adv=$W/runs/adv -o $W/fb
case_ "find-best --folds 0, output = fold 0's run" err 60 $T find-best --cv validation=$W/runs/adv --folds 0 -o $W/runs/adv/fold_0/run_0
case_ "find-best --folds 0" ok 120 $T find-best --cv adv=$W/runs/adv --folds 0 -o $W/fb
case_ "import-nnunet of a run folder" err 60 $T import-nnunet $W/runs/adv --data $DS -o $W/imp
case_ "import-nnunet of a 2d model" ok 60 $T import-nnunet $ROOT/cmd/train/testdata/nnunet_model/Dataset999_Tiny/nnUNetTrainer__nnUNetPlans__2d --data $DS -o $W/imp2d
case_ "predict with the imported 2d model" ok 120 $T predict --model-dir $W/imp2d/Dataset999_Tiny_2d -i $(ls $DS/imagesTr/*.nii.gz | head -1) -o $W/imp2d/p.nii.gz
echo "not a torch file" > $W/w.pt; case_ "init-weights text file named .pt" err 60 $T --config $C --run-id 6 --init-weights $W/w.pt
head -c 2000 $ROOT/checkpoint/torchpt/testdata/state_dict.pt > $W/cut.pt; case_ "init-weights truncated .pt" err 60 $T --config $C --run-id 7 --init-weights $W/cut.pt
case_ "init-weights a torch.save'd module" err 60 $T --config $C --run-id 8 --init-weights $ROOT/checkpoint/torchpt/testdata/model.pt
echo "PK junk" > $W/m.zip; case_ "install-model of a non-zip" err 60 $T install-model $W/m.zip -o $W/inst
# train plan on datasets whose dataset.json is wrong or unusual
pds() { # pds NAME LABELS_JSON [ORDER_JSON]: a 6-case dataset with those labels (and regions_class_order)
  rm -rf $W/$1; mkds $W/$1 6
  python3 -c "import json,sys; p=sys.argv[1]; d=json.load(open(p)); d['labels']=json.loads(sys.argv[2]); o=sys.argv[3] if len(sys.argv)>3 else ''
if o: d['regions_class_order']=json.loads(o)
json.dump(d, open(p,'w'))" $W/$1/dataset.json "$2" ${3:-}
}
pds rgnoorder '{"background": 0, "whole": [1, 2], "posterior": [2]}'; case_ "plan: regions without regions_class_order" err 120 $T plan $W/rgnoorder -o $W/pl1
pds rgshort '{"background": 0, "whole": [1, 2], "posterior": [2]}' '[1]'; case_ "plan: regions_class_order too short" err 120 $T plan $W/rgshort -o $W/pl2
pds rgign '{"background": 0, "whole": [1, 2], "ignore": 3}' '[1]'; case_ "plan: regions and an ignore label" ok 120 $T plan $W/rgign -o $W/pl3
pds undecl '{"background": 0, "anterior": 1}'; case_ "plan: label 2 in the data, not in dataset.json" err 120 $T plan $W/undecl -o $W/pl4
case_ "plan: no such dataset" err 60 $T plan $W/nonexistent -o $W/pl5
case_ "plan: -o is a file" err 120 $T plan $DS -o $W/base.yaml
case_ "plan: --gpu-memory -3" err 60 $T plan $DS -o $W/pl6 --gpu-memory -3
# corrupt metrics.jsonl then resume with more epochs
printf '{"epoch": 1, "loss": \n' >> $W/runs/adv/fold_0/run_0/metrics.jsonl
case_ "resume w/ torn metrics.jsonl" ok 300 $T --config $C --resume auto --epochs 2
# signals
mkcfg $W/long.yaml $DS; sed -i 's/epochs: 1/epochs: 50/; s/iterations_per_epoch: 2/iterations_per_epoch: 50/' $W/long.yaml
sigcase() { # name signal delay
  n=$((n+1)); local name=$1 sig=$2 d=$3
  $T --config $W/long.yaml --run-id $n > $W/c$n.out 2> $W/c$n.err & local p=$!
  sleep $d; kill -$sig $p; local t0=$(date +%s)
  ( sleep 60; kill -9 $p 2>/dev/null ) & local k=$!
  wait $p; local rc=$?; kill $k 2>/dev/null
  local flag=""; grep -q -E "^panic|goroutine [0-9]+ \[" $W/c$n.err && flag=PANIC; [ $rc = 137 ] && flag=HANG
  printf "%d\t%s\trc=%s\t%s\t%s\n" $n "$name" $rc "$flag" "$(( $(date +%s)-t0 ))s; $(grep -iE 'resume|interrupt|saved' $W/c$n.err $W/c$n.out | head -2 | tr '\n' ' ' | cut -c1-250)" >> $res
}
sigcase "SIGTERM during training" TERM 8
sigcase "SIGINT early (setup/verify)" INT 0.3
sigcase "SIGHUP during training" HUP 8
# concurrent
$T --config $W/long.yaml --run-id 77 > /dev/null 2>&1 & P=$!; sleep 3
case_ "concurrent same run dir" err 30 $T --config $W/long.yaml --run-id 77 --resume auto
kill -TERM $P; wait $P

# --- round 2: checkpoints, flags, signals
W1=$W; W=$W/r2; mkdir -p $W; DS=$W/ds; mkds $DS 6; C=$W/base.yaml; mkcfg $C $DS
case_ "good run" ok 300 $T --config $C
CK=$W/runs/adv/fold_0/run_0/checkpoints
L=$(readlink -f $CK/last)
c feat "features: [4, 8]=>features: [4, 16]"; case_ "resume with other model" err 60 $T --config $W/feat.yaml --resume auto
c seed "seed: 1=>seed: 2"; case_ "resume with other seed (warned: config differs)" ok 60 $T --config $W/seed.yaml --resume auto --epochs 2
echo '{' > $L/state.json 2>/dev/null; ls $L > $W/lsL.txt
case_ "resume w/ corrupt state.json in last" ok 300 $T --config $C --resume auto --epochs 2
rm -rf $W/runs2; mkdir -p $W/runs2; $T --config $C --output-dir $W/runs2 > /dev/null 2>&1
rm -rf $(readlink -f $W/runs2/adv/fold_0/run_0/checkpoints/last)
case_ "resume, last points to deleted dir" ok 300 $T --config $C --output-dir $W/runs2 --resume auto --epochs 2
echo x > $W/outfile; case_ "output_dir is a file" err 60 $T --config $C --output-dir $W/outfile
case_ "--fold 9 flag" err 60 $T --config $C --fold 9
case_ "--epochs -1" err 60 $T --config $C --run-id 4 --epochs -1
case_ "--threads 0 (all cores)" ok 60 $T --config $C --run-id 4 --threads 0
case_ "--device tpu" err 60 $T --config $C --run-id 4 --device tpu
case_ "--resume bogus" err 60 $T --config $C --run-id 4 --resume bogus
case_ "predict 2D slice image" ok 120 $T predict --checkpoint $CK/last --input $ROOT/nifti/testdata/synth/dt_int16_le.nii --output $W/p2d.nii.gz
case_ "validate --data other ds w/o labels dir" err 60 $T validate --checkpoint $CK/last --data $W/nonexist
# double SIGTERM
mkcfg $W/long.yaml $DS; sed -i 's/epochs: 1/epochs: 50/; s/iterations_per_epoch: 2/iterations_per_epoch: 50/' $W/long.yaml
n=$((n+1)); $T --config $W/long.yaml --run-id 31 > $W/c$n.out 2> $W/c$n.err & p=$!; sleep 6; kill -TERM $p; sleep 0.05; kill -TERM $p; wait $p; rc=$?
printf "%d\t%s\trc=%s\t\t%s\n" $n "double SIGTERM" $rc "$(tail -2 $W/c$n.err | tr '\n' ' ' | cut -c1-250)" >> $res
n=$((n+1)); $T --config $W/long.yaml --run-id 31 --resume auto --epochs 1 > $W/c$n.out 2> $W/c$n.err; rc=$?
printf "%d\t%s\trc=%s\t\t%s\n" $n "resume after double SIGTERM" $rc "$(tail -2 $W/c$n.err | tr '\n' ' ' | cut -c1-250)" >> $res
# SIGTERM during sliding validation
c slide "  mode: patch=>  mode: sliding||iterations: 1=>iterations: 1\n  max_cases: 3||epochs: 1=>epochs: 3"
n=$((n+1)); $T --config $W/slide.yaml --run-id 41 > $W/c$n.out 2> $W/c$n.err & p=$!
for i in $(seq 1 300); do grep -q -i "validat" $W/c$n.out $W/c$n.err 2>/dev/null && break; sleep 0.1; done; kill -TERM $p; wait $p; rc=$?
printf "%d\t%s\trc=%s\t\t%s\n" $n "SIGTERM in sliding validation" $rc "$(grep -iE 'stopped|resume' $W/c$n.err | head -2 | tr '\n' ' ' | cut -c1-250)" >> $res
# SIGTERM during the final validation (after the training completed): 143, and a resume validates again
n=$((n+1)); $T --config $C --run-id 42 --final-validation last > $W/c$n.out 2> $W/c$n.err & p=$!
for i in $(seq 1 600); do grep -q "final validation:" $W/c$n.out 2>/dev/null && break; sleep 0.05; done; kill -TERM $p; wait $p; rc=$?
printf "%d\t%s\trc=%s\t\t%s\n" $n "SIGTERM in the final validation" $rc "$(tail -1 $W/c$n.err | cut -c1-250)" >> $res
case_ "resume after SIGTERM in the final validation" ok 300 $T --config $C --run-id 42 --final-validation last --resume auto

# --- round 3: data edits (one run directory each) and a full disk
W=$W1/r3; mkdir -p $W; C=$W/base.yaml; mkcfg $C $DS
bad() { rm -rf $W/$1; mkds $W/$1 6; mkcfg $W/$1.yaml $W/$1; sed -i "s#output_dir: .*#output_dir: $W/runs_$1#" $W/$1.yaml; }
edit() { python3 $HERE/niedit.py "$@"; }
bad zeros; edit $(ls $W/zeros/imagesTr/*.gz | sed -n 2p) zeros; case_ "all-zero image (std 0)" ok 300 $T --config $W/zeros.yaml
bad nofg; edit $(ls $W/nofg/labelsTr/*.gz | sed -n 2p) zeros; case_ "label without foreground" ok 300 $T --config $W/nofg.yaml
bad half; edit $(ls $W/half/labelsTr/*.gz | sed -n 2p) half; case_ "label 0.5 values (float)" err 120 $T --config $W/half.yaml
bad negsp; edit $(ls $W/negsp/imagesTr/*.gz | sed -n 2p) negspacing; case_ "negative pixdim in image" ok 300 $T --config $W/negsp.yaml
mkdir -p $W/full; if mount -t tmpfs -o size=24k tmpfs $W/full; then
  case_ "disk full output_dir" err 300 $T --config $C --output-dir $W/full; ls -laR $W/full > $W/full.ls; umount $W/full; fi

cat $res
