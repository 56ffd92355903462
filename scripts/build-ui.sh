#!/usr/bin/env bash
# Builds the bench-ui dashboard into www/pkg/ (served by lock-server --web-root www): two wasm
# modules from the one crate, each linking only what its exports reach.
#   - www/pkg/bench_ui.js (feature "page"): the dashboard; index.html calls run_dashboard.
#     It is all a first visit downloads.
#   - www/pkg/engine/bench_engine.js (feature "engine"): the experiment engine the page runs
#     its jobs in, fetched at the first job. worker.js (a module worker) calls
#     run_experiment_worker; without workers the page imports it (run_engine_on_page).
# Idempotent: cargo and wasm-bindgen only redo what changed.
#
#   scripts/build-ui.sh            # release build (what the run command serves)
#   BENCH_UI_PROFILE=dev scripts/build-ui.sh   # faster debug build
#
# Steps, per module: cargo build --target wasm32-unknown-unknown -p bench-ui, then wasm-bindgen
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
  # than `release` after wasm-opt; the page's first visit is mostly the page's wasm).
  cargo_profile=(--profile wasm-release)
  dir=wasm-release
else
  cargo_profile=()
  dir=debug
fi
built="$target_dir/wasm32-unknown-unknown/$dir/bench_ui.wasm"
mkdir -p "$target_dir/bench-ui-modules"
# MODULE FEATURE: the crate built with only FEATURE's exports, kept as bench-ui-modules/MODULE.wasm
# (both builds write the same file).
build_module() {
  cargo build -p bench-ui --lib --target wasm32-unknown-unknown "${cargo_profile[@]}" \
    --no-default-features --features "$2"
  cp "$built" "$target_dir/bench-ui-modules/$1.wasm"
}
build_module page page
build_module engine engine
page_wasm="$target_dir/bench-ui-modules/page.wasm"
engine_wasm="$target_dir/bench-ui-modules/engine.wasm"

# Nothing to do when www/pkg/ was generated from these very wasm files (and this script).
stamp=www/pkg/.built-from
fingerprint="$profile $(cksum < "$page_wasm") $(cksum < "$engine_wasm") $(cksum < scripts/build-ui.sh)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$fingerprint" ] && [ -f www/pkg/bench_ui_bg.wasm ] &&
  [ -f www/pkg/engine/bench_engine_bg.wasm ]; then
  echo "build-ui: www/pkg/ is up to date"
  exit 0
fi

# OUT_DIR NAME WASM: wasm-bindgen's JS and wasm for WASM, as OUT_DIR/NAME.js and NAME_bg.wasm.
# Each module has its own directory: each gets the JS snippets its own code imports.
bindgen() {
  rm -rf "$1"
  wasm-bindgen --target web --no-typescript --out-dir "$1" --out-name "$2" "$3"
  if [ "$profile" = "release" ]; then
    # -Oz: the dashboard is downloaded once per visit; size matters more than speed here.
    "$wasm_opt" -Oz --enable-bulk-memory --enable-nontrapping-float-to-int \
      --enable-sign-ext --enable-mutable-globals \
      "$1/$2_bg.wasm" -o "$1/$2_bg.wasm.opt"
    mv "$1/$2_bg.wasm.opt" "$1/$2_bg.wasm"
  fi
}
# The page's directory first: it holds the engine's.
bindgen www/pkg bench_ui "$page_wasm"
bindgen www/pkg/engine bench_engine "$engine_wasm"

# Every file of pkg/, compressed once here rather than per request (the variants are written
# after the files they stand for, so they are never older).
find www/pkg -type f \( -name '*.wasm' -o -name '*.js' \) -print0 | xargs -0 node scripts/precompress.mjs
check_export() {
  grep -q "export function $2" "$1" ||
    { echo "build-ui: $1 lacks $2 (used by www/)" >&2; exit 1; }
}
check_export www/pkg/bench_ui.js run_dashboard
check_export www/pkg/engine/bench_engine.js run_experiment_worker
check_export www/pkg/engine/bench_engine.js run_engine_on_page
echo "$fingerprint" > "$stamp"
kb() { du -k "$1" | cut -f1; }
echo "build-ui: www/pkg/ ready ($profile; page $(kb www/pkg/bench_ui_bg.wasm) KB wasm, engine $(kb www/pkg/engine/bench_engine_bg.wasm) KB wasm)"
