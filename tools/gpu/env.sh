# Source me on the lent GPU box (Python 3.12, torch preinstalled, no network) from the repository root:
#     source tools/gpu/env.sh WORKDIR
# Installs the carried wheels (.whl/ and whl-extra/, pip download'ed for cp312: asv and mpsbench's missing dependencies) into
# WORKDIR/site and points PYTHONPATH, PATH and pip at them, so that asv's virtualenvs install offline.
W=${1:?usage: source tools/gpu/env.sh WORKDIR}
T0=$(date +%s)
say() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
WHEELS=$(ls .whl whl-extra 2>/dev/null)
if [ "$WHEELS" != "$(cat "$W/site/.wheels" 2>/dev/null)" ]; then  # once per machine and set of wheels
    mkdir -p "$W/wheels"
    cp .whl/*.whl "$W/wheels/"
    [ -d whl-extra ] && cp whl-extra/*.whl "$W/wheels/"  # what .whl lacks (pydantic for mpsbench's manifest)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$W/site" "$W"/wheels/*.whl \
        || { say "wheel install failed"; return 3; }
    echo "$WHEELS" > "$W/site/.wheels"
fi
export PYTHONPATH=$W/site:$PWD/src:$PWD PATH=$W/site/bin:$PATH PIP_NO_INDEX=1 PIP_FIND_LINKS=$W/wheels PYTHONUNBUFFERED=1
say "machine: $(nvidia-smi -L | head -1); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
python3 -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__, torch.cuda.get_device_name(0))"
