#!/usr/bin/env bash
# make uninstall PREFIX=DIR: removes what `make install PREFIX=DIR` from
# this build puts there.  The list is not a manifest from an earlier
# install (one install into another prefix, or the install test, would
# replace it): the install is staged into a temporary DESTDIR and each file
# found there is removed from PREFIX, plus the Python package's folder
# (with the __pycache__ Python writes into it).  Other folders stay.
#   usage: scripts/uninstall.sh BUILD_DIR PREFIX
set -euo pipefail
build=${1:?usage: uninstall.sh BUILD_DIR PREFIX}
prefix=${2:?usage: uninstall.sh BUILD_DIR PREFIX}
case "$prefix" in /*) ;; *) echo "uninstall: PREFIX must be an absolute path, got '$prefix'" >&2; exit 2 ;; esac
[ -f "$build/cmake_install.cmake" ] || { echo "uninstall: '$build' is not a configured build folder (make build first)" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
DESTDIR=$stage cmake --install "$build" --prefix "$prefix" >/dev/null
n=0
while IFS= read -r -d '' f; do
  rel=${f#"$stage$prefix"/}
  if [ -e "$prefix/$rel" ] || [ -L "$prefix/$rel" ]; then
    rm -f "$prefix/$rel"
    n=$((n + 1))
  fi
done < <(find "$stage$prefix" \( -type f -o -type l \) -print0)
while IFS= read -r -d '' d; do
  rel=${d#"$stage$prefix"/}
  [ -d "$prefix/$rel" ] && rm -rf "${prefix:?}/$rel"
done < <(find "$stage$prefix" -type d -path '*-packages/tsopt' -print0)
echo "uninstall: removed $n files from $prefix"
