# Source on the lent GPU machine (after ../shared/gpu's recv.sh chunks have installed RAPIDS):
#   source benchmarks/gpu_env.sh
# Makes this checkout importable as cutext.* (packages there live on PYTHONPATH, so the editable
# install's .pth finder is not processed; see docs/decisions.md, Packaging) and points the data
# loaders at the carried .devdata/ copy of ../shared/data.
source /tmp/gpu/env.sh
mkdir -p /tmp/cx/cutext
for d in pipelines stages kernels; do ln -sfn "$PWD/$d" "/tmp/cx/cutext/$d"; done
ln -sfn "$PWD/cutext_init/__init__.py" /tmp/cx/cutext/__init__.py
export PYTHONPATH=/tmp/cx:$PWD/tests:$PYTHONPATH
export CUTEXT_DATA=$PWD/.devdata
export PYTHONUNBUFFERED=1
