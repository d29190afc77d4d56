#!/usr/bin/env bash
# Installs what tsopt needs on Debian 12. Idempotent; on a machine that already
# has everything it only checks (about a second).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "deps: error: $*" >&2; exit 1; }

PKGS=(
  # build
  cmake clang libclang-rt-14-dev libomp-dev pkgconf
  # ONNX parsing (protobuf-c, schema from libonnx-dev)
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev
  # kernels, proofs, tests
  libdnnl-dev libopenblas-dev libz3-dev libcriterion-dev
  # pictures
  graphviz gnuplot
  # model export and test oracles (Debian's /usr/bin/python3)
  python3-numpy python3-onnx python3-torch python3-torchvision
  # ONNX's backend test data (tests/conformance/)
  libonnx-testdata
  # generate/verify/fuzz over several machines (docs/distributed.md)
  libopenmpi-dev openmpi-bin
  # tsopt fuzz: eOperators compiled in ~10 ms instead of gcc -O3's ~200 (docs/fuzz.md)
  tcc libtcc-dev
  # ONNX Runtime peer
  nodejs npm
)

installed() {
  case "$1" in
    # A NodeSource nodejs bundles npm and conflicts with Debian's npm package:
    # accept any node/npm on PATH.
    nodejs) command -v node >/dev/null 2>&1 && return 0 ;;
    npm) command -v npm >/dev/null 2>&1 && return 0 ;;
  esac
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script expects Debian 12"

missing=()
for p in "${PKGS[@]}"; do
  installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: Debian packages: all ${#PKGS[@]} present"
else
  echo "deps: Debian packages: installing ${missing[*]}"
  SUDO=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: install ${missing[*]} by hand"
    SUDO=(sudo)
  fi
  # Wait for another apt/dpkg run (e.g. unattended upgrades) instead of failing.
  APT_OPTS=(-o DPkg::Lock::Timeout=600)
  log=$(mktemp /tmp/tsopt-deps.XXXXXX.log)
  if ! "${SUDO[@]}" apt-get "${APT_OPTS[@]}" update -qq >"$log" 2>&1; then
    tail -n 20 "$log" >&2; die "apt-get update failed (log: $log)"
  fi
  if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install -y -qq "${missing[@]}" >>"$log" 2>&1; then
    tail -n 20 "$log" >&2; die "apt-get install failed for: ${missing[*]} (log: $log)"
  fi
  rm -f "$log"
  for p in "${missing[@]}"; do
    installed "$p" || die "package $p still missing after apt-get install"
  done
fi

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null) || die "node does not run"
[ "$node_major" -ge 18 ] || die "node >= 18 needed for tools/ort, found $(node -v)"

# ONNX Runtime for Node: its CPU library ships inside the npm package, so the
# install script (which would download GPU libraries) is skipped.
ORT_DIR=tools/ort
if [ ! -d "$ORT_DIR/node_modules" ] || [ "$ORT_DIR/package-lock.json" -nt "$ORT_DIR/node_modules/.package-lock.json" ]; then
  echo "deps: npm ci in $ORT_DIR"
  (cd "$ORT_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) \
    || die "npm ci failed in $ORT_DIR (network? see the npm output above)"
  # npm ci may keep the old mtime of the hidden lockfile; mark it fresh.
  if [ -f "$ORT_DIR/node_modules/.package-lock.json" ]; then touch "$ORT_DIR/node_modules/.package-lock.json"; fi
else
  echo "deps: $ORT_DIR/node_modules up to date"
fi
(cd "$ORT_DIR" && node -e "require('onnxruntime-node')") \
  || die "onnxruntime-node does not load; remove $ORT_DIR/node_modules and rerun"
echo "deps: onnxruntime-node $(cd "$ORT_DIR" && node -p "require('onnxruntime-node/package.json').version") loads"
