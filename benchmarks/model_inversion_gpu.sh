#!/usr/bin/env bash
# The full ORL sweep of benchmarks/model_inversion.py on a GPU machine that lacks pydantic, dlib
# and the data (Python 3.12, torch with CUDA, no network).
#
#   bundle (here, from the repository root, with the project's venv and TRAINLEAK_DATA set):
#       bash benchmarks/model_inversion_gpu.sh bundle
#     writes .mi_gpu/ (git-ignored through .git/info/exclude, about 35 MB): cp312 wheels of
#     pydantic 2.14.4, pydantic-core 2.50.5, annotated-types 0.8.0, typing-inspection 0.4.5,
#     typing-extensions 4.16.0 (pydantic needs >= 4.16) and
#     dlib-bin 20.0.1.post1; the ORL faces; dlib's face-recognition model file.
#   run (there, from the repository root; carry .mi_gpu):
#       bash benchmarks/model_inversion_gpu.sh run [extra benchmark arguments]
#     installs the wheels into /tmp/site, runs a smoke pass on cuda (seconds; MI_SMOKE=0 skips
#     it), then the full
#     sweep (all eight defenses, the AT-AT weight and radius grid) and copies the results to
#     $OUT (benchmarks/results/model_inversion.{json,md} and a log).
set -euo pipefail
case "${1:-}" in
bundle)
  py="${PYTHON:-python}"
  exclude="$(git rev-parse --git-path info/exclude)"
  grep -qx '/.mi_gpu/' "$exclude" 2>/dev/null || echo '/.mi_gpu/' >>"$exclude"
  rm -rf .mi_gpu
  mkdir -p .mi_gpu/whl .mi_gpu/data .mi_gpu/site/face_recognition_models/models
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .mi_gpu/whl \
    pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
    typing-extensions==4.16.0 dlib-bin==20.0.1.post1
  cp -r "${TRAINLEAK_DATA:?set TRAINLEAK_DATA}/att_faces" .mi_gpu/data/
  model="$("$py" -c 'from trainleak.metrics.face_identity import model_file; print(model_file())')"
  cp "$model" .mi_gpu/site/face_recognition_models/models/
  touch .mi_gpu/site/face_recognition_models/__init__.py
  du -sh .mi_gpu
  ;;
run)
  shift
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .mi_gpu/whl/*.whl
  export PYTHONPATH="$PWD/src:/tmp/site:$PWD/.mi_gpu/site" TRAINLEAK_DATA="$PWD/.mi_gpu/data"
  export TRAINLEAK_CACHE=/tmp/trainleak-cache PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
  out="${OUT:-/tmp/mi-out}"
  mkdir -p "$out"
  if [ "${MI_SMOKE:-1}" = 1 ]; then
    python3 benchmarks/model_inversion.py --device cuda --smoke 2>&1 | tee "$out/smoke.log"
  fi
  python3 benchmarks/model_inversion.py --device cuda "$@" 2>&1 | tee "$out/run.log"
  cp benchmarks/results/model_inversion.json benchmarks/results/model_inversion.md "$out/"
  ;;
*)
  echo "usage: $0 bundle | run [benchmark arguments]" >&2
  exit 2
  ;;
esac
