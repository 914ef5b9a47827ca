#!/usr/bin/env bash
# Benchmark peers for benchmarks/peers/lm.py (KenLM's lmplz and build_binary) and benchmarks/peers/align.py
# (eflomal). Idempotent: a step whose result exists is skipped. Peers only: neither is a
# dependency of varorder (eflomal is GPL; KenLM is LGPL).
#
#   benchmarks/peers/install_peers.sh                    # into /tmp/peers
#   PEERS=/opt/peers PYTHON=.venv/bin/python benchmarks/peers/install_peers.sh
#
# Gives $PEERS/bin/lmplz, $PEERS/bin/build_binary, $PEERS/bin/query (KenLM from the sdist of
# the `kenlm` Python package, which holds the whole C++ tree; built with cmake, Release, max
# order 6) and `eflomal` / `eflomal-align` installed into $PYTHON's environment.
set -euo pipefail

PEERS=${PEERS:-/tmp/peers}
PYTHON=${PYTHON:-/work/main/.venv/bin/python}
JOBS=${JOBS:-2}
KENLM_VERSION=${KENLM_VERSION:-0.3.0}

mkdir -p "$PEERS/src" "$PEERS/bin"

# 1. Build dependencies (Debian). Only what is missing is installed.
need=()
for package in cmake g++ make libboost-program-options-dev libboost-system-dev libboost-thread-dev \
               libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev; do
    dpkg -s "$package" >/dev/null 2>&1 || need+=("$package")
done
if ((${#need[@]})); then
    SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi

# 2. KenLM: lmplz, build_binary and query.
if [ ! -x "$PEERS/bin/lmplz" ] || [ ! -x "$PEERS/bin/build_binary" ] || [ ! -x "$PEERS/bin/query" ]; then
    cd "$PEERS/src"
    # Not --no-binary :all: (that builds cmake itself from source for the metadata step).
    [ -f "kenlm-$KENLM_VERSION.tar.gz" ] || "$PYTHON" -m pip download --no-deps "kenlm==$KENLM_VERSION" -d .
    [ -d "kenlm-$KENLM_VERSION" ] || tar xzf "kenlm-$KENLM_VERSION.tar.gz"
    cmake -S "kenlm-$KENLM_VERSION" -B "kenlm-build" -DCMAKE_BUILD_TYPE=Release -DKENLM_MAX_ORDER=6 >/dev/null
    cmake --build kenlm-build -j "$JOBS" --target lmplz build_binary query
    cp kenlm-build/bin/lmplz kenlm-build/bin/build_binary kenlm-build/bin/query "$PEERS/bin/"
fi

# 3. eflomal (Python front end `eflomal-align` + its C aligner), into $PYTHON's environment.
"$PYTHON" -c "import eflomal" 2>/dev/null || "$PYTHON" -m pip install eflomal

echo "peers: $PEERS/bin/lmplz $PEERS/bin/build_binary $PEERS/bin/query; eflomal in $("$PYTHON" -c 'import eflomal, os; print(os.path.dirname(eflomal.__file__))')"
