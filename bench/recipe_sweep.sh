#!/bin/bash
# Recipe sweep for issue 12, part 1: several en->de recipes trained side by side on one GPU, each then scored
# on the whole val split (never test). A GPU stands in for hours of the 2-core CPU: each line of the runs
# file names a run, the steps the CPU trains in an hour with that recipe (measure them first: 200-step
# probes, seconds a step x 1.04 for the validations), and its --set overrides. All runs share the GPU
# for MINUTES; where that is too short for their steps, fit_steps_to_time ends every decay early, at about
# the same step for all, so they stay comparable with each other (not with the CPU hour).
#
#   DATA=../shared/data/multi30k MINUTES=6.3 bash bench/recipe_sweep.sh bench/recipe_sweep_runs.txt
#   TESTS=1 ...   also runs tests/test_cuda.py beside the sweep
#
# Out: $SWEEP (default /tmp/sweep): one run directory, log and val score (NAME.val.json) per line,
# and a table on stdout: val BLEU -lc (beam 5, alpha 1.0, the run's 10 averaged checkpoints), steps trained
# and the dev BLEU curve (greedy, 500 sentences). $OUT/sweep.tgz keeps the logs and metrics where OUT is set.
set -u
RUNS=${1:?usage: bench/recipe_sweep.sh RUNS_FILE}
DATA=${DATA:?set DATA to the Multi30k directory}
DEV=${DEV:-cuda}; M=${MINUTES:-6.3}; S=${SWEEP:-/tmp/sweep}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$S"
# An existing run directory would be resumed, not trained anew (aiayn train's exact resume), and its old
# score reported as this sweep's: refuse before anything starts.
while read -r name _; do
  [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
  if [ -e "$S/$name" ]; then
    echo "bench/recipe_sweep.sh: $S/$name exists ($RUNS names run '$name'); set SWEEP to a new directory" \
         "or remove it" >&2
    exit 2
  fi
done < "$RUNS"

train() {  # name steps overrides...
  local name=$1 steps=$2; shift 2
  timeout "$(python3 -c "print(int($M * 60 + 120))")" python3 -m aiayn train configs/multi30k_en_de.yaml \
    --data-dir "$DATA" --out "$S/$name" --device "$DEV" --set train.num_threads=1 \
    --set train.max_steps="$steps" --set train.max_minutes="$M" "$@" > "$S/$name.log" 2>&1
  timeout 70 python3 -m aiayn evaluate --model "$S/$name" --dataset multi30k --pair en-de --split val \
    --data-dir "$DATA" --device "$DEV" --beam 5 --alpha 1.0 --bootstrap 0 --json > "$S/$name.val.json" 2> "$S/$name.val.err"
}

if [ -n "${TESTS:-}" ]; then
  (timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py > "$S/test_cuda.log" 2>&1
   echo "rc $?" >> "$S/test_cuda.log") &
fi
while read -r name steps overrides; do
  [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
  # shellcheck disable=SC2086  # the overrides are words on purpose
  train "$name" "$steps" $overrides &
done < "$RUNS"
wait

python3 - "$S" "$RUNS" <<'PY'
import json, sys
from pathlib import Path
sys.path.insert(0, "bench")
from results_table import learning_curve, training_steps  # noqa: E402 (bench/ is not a package)

sweep, runs = Path(sys.argv[1]), sys.argv[2]
names = [line.split()[0] for line in open(runs) if line.strip() and not line.startswith("#")]
print(f"{'run':12} {'val -lc':>8} {'steps':>6}  dev BLEU (greedy) by step")
for name in names:
    if not (sweep / name / "metrics.jsonl").exists():
        print(f"{name:12} failed before its first logged step: see {sweep / name}.log")
        continue
    try:
        scores = json.loads((sweep / f"{name}.val.json").read_text())["scores"]
        val = next(s["score"] for s in scores if s["name"] == "BLEU-lc")
    except (OSError, ValueError, StopIteration):
        val = float("nan")  # the evaluation failed or timed out: NAME.val.err says why
    curve = " ".join(f"{step}:{bleu:.1f}" for _, step, bleu in learning_curve(sweep / name))
    print(f"{name:12} {val:8.2f} {training_steps(sweep / name):6d}  {curve}")
PY
[ -n "${TESTS:-}" ] && tail -3 "$S/test_cuda.log"
if [ -n "${OUT:-}" ]; then
  (cd "$S" && tar czf "$OUT/sweep.tgz" ./*.log ./*.json ./*/metrics.jsonl ./*/config.yaml)
fi
