#!/usr/bin/env bash
# bench/llamacpp_bench.py on the accelerator host (13 cores, no internet, no PyPI; JAX, numpy and
# scipy installed), run from the repository root with the wheels it lacks in .whl-tpu/:
#
#   bash bench/tpu_host_decode.sh "125m 1.1b" [llamacpp_bench.py options...]    # e.g. --threads 1,4
#   STAGE=build bash bench/tpu_host_decode.sh 7b --variants int4 --gguf Q4_0     # then STAGE=time
#
# .whl-tpu/ (carried to the host): llama_cpp_python (built from source for x86-64 with AVX2/FMA/F16C,
# no -march=native), onnxruntime-genai and the onnxruntime it needs, onnx-ir, jinja2, markupsafe,
# diskcache. flax, gguf, onnx and safetensors come from the host's own index (/opt/pypi). Our
# packages run from the repository's sources (PYTHONPATH; bench/source_dist_info.py gives them
# the entry points an install would). Installs once per machine into /tmp; the
# built models stay in /tmp/llamacpp-<size> (WORKDIR), so a size cut off by the 10-minute limit of a
# call resumes in the next call on the same (still warm) machine. Results: $OUT (or bench/results).
set -euo pipefail
sizes=${1:-smoke}
shift || true
out=${OUT:-$PWD/bench/results}
mkdir -p "$out"
site=/tmp/site
if [ ! -e "$site/.installed" ]; then
  PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$site" .whl-tpu/*.whl
  # with their dependencies (JAX among them lands here too, but the host's own stays first on the path)
  PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --only-binary=:all: --no-compile --no-cache-dir \
    --index-url file:///opt/pypi/simple --target /tmp/site-index flax gguf onnx safetensors
  touch "$site/.installed"
fi
src=$PWD/packages
python3 bench/source_dist_info.py "$site"  # core finds its packs through entry points
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$src/core/src:$src/plugins-lax/src:$src/plugins-jnp/src:$src/plugins-nnx/src:$src/examples/src:$src/plugins-llm/src:$site:/tmp/site-index
export JAX_PLATFORMS=cpu PYTHONUNBUFFERED=1
python3 -c 'import os, platform; print("host:", platform.platform(), os.cpu_count(), "cpus, load", os.getloadavg())'
for size in $sizes; do
  stage=(--stage "${STAGE:-all}")
  python3 bench/llamacpp_bench.py --size "$size" --workdir "${WORKDIR:-/tmp/llamacpp-$size}" --out "$out" "${stage[@]}" "$@" \
    2>&1 | sed "/^jax2onnx:  /d; /Transparent hugepages are not enabled/d; /^  warnings.warn(\$/d" | tee -a "$out/llamacpp-host.log"
done
