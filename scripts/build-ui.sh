#!/usr/bin/env bash
# Builds the bench-ui dashboard into www/pkg/ (served by lock-server --web-root www). One
# build serves both of www/'s entry points: the page (index.html: run_dashboard) and the
# experiment worker (worker.js, a module worker: run_experiment_worker) import the same
# pkg/bench_ui.js.
# Idempotent: cargo and wasm-bindgen only redo what changed.
#
#   scripts/build-ui.sh            # release build (what the run command serves)
#   BENCH_UI_PROFILE=dev scripts/build-ui.sh   # faster debug build
#
# Steps: cargo build --target wasm32-unknown-unknown -p bench-ui, then wasm-bindgen
# --target web (the CLI must equal the wasm-bindgen crate in Cargo.lock), then, for a release
# build, wasm-opt -Oz from npm binaryen@132 in .tools/ (or $SETUP_TOOLS_DIR), then the .br and
# .gz variants lock-server serves by Accept-Encoding (scripts/precompress.mjs, Node's zlib).
# scripts/setup.sh installs all of it. A release build without wasm-opt is refused rather than served over a third
# larger. Debian's binaryen is never used: its wasm-opt (v108) emits wasm that fails to load.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
profile="${BENCH_UI_PROFILE:-release}"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
wasm_opt="${SETUP_TOOLS_DIR:-$root/.tools}/node_modules/.bin/wasm-opt"

want="$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
have="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)"
if [ "$have" != "$want" ]; then
  echo "build-ui: wasm-bindgen CLI $want required (found '${have:-none}'); run scripts/setup.sh run" >&2
  exit 1
fi
if [ "$profile" = "release" ] && [ ! -x "$wasm_opt" ]; then
  echo "build-ui: a release build needs wasm-opt ($wasm_opt, npm binaryen@132); run scripts/setup.sh run" >&2
  exit 1
fi

if [ "$profile" = "release" ]; then
  # Cargo.toml's wasm-release: opt-level "z", fat LTO, one codegen unit (a quarter smaller
  # than `release` after wasm-opt; the page's first visit is mostly this file).
  cargo build -p bench-ui --lib --target wasm32-unknown-unknown --profile wasm-release
  dir=wasm-release
else
  cargo build -p bench-ui --lib --target wasm32-unknown-unknown
  dir=debug
fi
wasm="$target_dir/wasm32-unknown-unknown/$dir/bench_ui.wasm"

# Nothing to do when www/pkg/ was generated from this very wasm (and this script) already.
stamp=www/pkg/.built-from
fingerprint="$profile $(cksum < "$wasm") $(cksum < scripts/build-ui.sh)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$fingerprint" ] && [ -f www/pkg/bench_ui_bg.wasm ]; then
  echo "build-ui: www/pkg/ is up to date"
  exit 0
fi

mkdir -p www/pkg
wasm-bindgen --target web --no-typescript --out-dir www/pkg "$wasm"

if [ "$profile" = "release" ]; then
  # -Oz: the dashboard is downloaded once per visit; size matters more than speed here.
  "$wasm_opt" -Oz --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals \
    www/pkg/bench_ui_bg.wasm -o www/pkg/bench_ui_bg.wasm.opt
  mv www/pkg/bench_ui_bg.wasm.opt www/pkg/bench_ui_bg.wasm
fi
# Every file of pkg/, compressed once here rather than per request (the variants are written
# after the files they stand for, so they are never older).
find www/pkg -type f \( -name '*.wasm' -o -name '*.js' \) -print0 | xargs -0 node scripts/precompress.mjs
for entry in run_dashboard run_experiment_worker; do
  grep -q "export function $entry" www/pkg/bench_ui.js ||
    { echo "build-ui: www/pkg/bench_ui.js lacks $entry (used by www/)" >&2; exit 1; }
done
echo "$fingerprint" > "$stamp"
echo "build-ui: www/pkg/ ready ($(du -k www/pkg/bench_ui_bg.wasm | cut -f1) KB wasm, $profile)"
