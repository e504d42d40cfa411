#!/bin/sh
# Removes the native add-on binaries this machine cannot load from node_modules (run in the
# container image after `npm ci --omit=dev`): uWebSockets.js ships ~110 MB for every platform and
# Node ABI, lmdb other ABIs and musl builds. Keeps exactly what this Node loads; fails if that is missing.
set -eu
cd "${1:-.}"
abi=$(node -p process.versions.modules)
keep="uws_$(node -p 'process.platform + "_" + process.arch')_${abi}.node"
find node_modules/uWebSockets.js/binaries -name 'uws_*.node' ! -name "$keep" -delete
rm -rf node_modules/uWebSockets.js/dist/*.node node_modules/uWebSockets.js/docs
if [ -d node_modules/@lmdb ]; then
  find node_modules/@lmdb -name 'node.*.node' ! -name "node.abi${abi}.glibc.node" ! -name 'node.napi.glibc.node' -delete
fi
test -f "node_modules/uWebSockets.js/binaries/$keep"
