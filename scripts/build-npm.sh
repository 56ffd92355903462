#!/usr/bin/env bash
# Builds the `lock-wasm` npm package and packs it into a tarball.
#
#   scripts/build-npm.sh [OUT_DIR]      # default OUT_DIR: target/npm
#
# Produces OUT_DIR/package/ (the unpacked package) and OUT_DIR/lock-wasm-<version>.tgz, and
# prints the raw and gzipped sizes of both optimised .wasm modules. Steps:
#   1. cargo build the lock-wasm cdylib for wasm32-unknown-unknown (release, size-tuned)
#      twice: feature `wasm` (the SDK: node/, web/) and feature `testkit` (the in-process
#      test kit of `lock-wasm/testing`: testing/), so the SDK's module never carries the kit;
#   2. wasm-bindgen per module twice: `--target nodejs` (CommonJS, sync load) for Node and Bun
#      and `--target web` (ESM) for browsers, bundlers, Deno and Workers;
#   3. wasm-opt -Os from npm `binaryen@132` (never Debian's binaryen: its v108 wasm-opt emits
#      modules that fail at load time);
#   4. copy the hand-written JS layer and types from lock-wasm/npm/ (the ESM entries get
#      their named exports written in from the keys of `createApi()`'s result, the one list
#      of the package's exports) and `npm pack`.
# Tools are installed on first use by `scripts/setup.sh run` and reused after (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
out="$(realpath -m "${1:-target/npm}")"
tools="${SETUP_TOOLS_DIR:-$root/.tools}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

log() { printf '== build-npm: %s\n' "$*" >&2; }

# Builds the cdylib with `feature` and copies it to `dest` (both builds write the same
# artifact path).
build_wasm() {
  local feature="$1" dest="$2"
  log "cargo build lock-wasm --features $feature (wasm32, release)"
  # Size over speed (opt-level z) for the shipped module: the SDK's hot path is
  # network-bound. Set through the environment so the workspace's release profile stays as
  # the server wants it.
  CARGO_PROFILE_RELEASE_OPT_LEVEL=z \
  CARGO_PROFILE_RELEASE_LTO=fat \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
  CARGO_PROFILE_RELEASE_DEBUG=false \
    cargo build -p lock-wasm --lib --release --target wasm32-unknown-unknown \
      --no-default-features --features "$feature" >&2
  cp "$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/lock_wasm.wasm" "$dest"
}

bindgen() {
  local wasm="$1" target="$2" dir="$3" name="$4"
  wasm-bindgen "$wasm" --target "$target" --out-dir "$dir" --out-name "$name"
  # Features the Rust wasm32 target enables by default; wasm-opt must be told to keep them.
  "$tools/node_modules/.bin/wasm-opt" -Os --converge --strip-debug --strip-producers \
    --enable-bulk-memory --enable-mutable-globals --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-reference-types --enable-multivalue \
    "$dir/${name}_bg.wasm" -o "$dir/${name}_bg.wasm"
}

# The CommonJS copy of an ES module, line for line (a stack trace's line numbers hold in
# both), so that each JS file has one source for both module systems and no bundler is
# needed. Its static imports, each `import { names } from "./file.js"`, become
# `const { names } = require("./file.cjs")` (that file's copy, built beside it). Its exports
# become module.exports: either its `export function` lines, made plain, or its one
# `export { names }` statement. Any other import or export form fails the build instead of
# shipping a copy that differs.
to_cjs() {
  node -e '
    const fs = require("fs");
    const file = process.argv[1];
    const fail = (message) => {
      console.error(`== build-npm: ${file}: ${message}`);
      process.exit(1);
    };
    // The inside of a `{ a, b }` list, kept as written (line breaks too); renaming is refused.
    const plain = (names) => {
      const each = names.split(",").map((n) => n.trim()).filter(Boolean);
      if (each.length === 0 || !each.every((n) => /^[A-Za-z_$][\w$]*$/.test(n))) {
        fail(`only plain names convert: {${names}}`);
      }
      return names;
    };
    const functions = [];
    let lists = 0;
    const text = fs
      .readFileSync(file, "utf8")
      .replace(/^import \{([^}]*)\} from "(\.\/[^"]+)\.js";$/gm,
        (_, names, path) => `const {${plain(names)}} = require("${path}.cjs");`)
      .replace(/^export \{([^}]*)\};$/gm, (_, names) => {
        lists += 1;
        return `module.exports = {${plain(names)}};`;
      })
      .replace(/^export function ([A-Za-z_$][\w$]*)/gm, (_, name) => {
        functions.push(name);
        return `function ${name}`;
      });
    if (lists + Math.sign(functions.length) !== 1) {
      fail("exports through either `export function` lines or one `export { ... }`");
    }
    // What is left has no CommonJS spelling here (a dynamic import() stays as it is).
    const left = text.match(/^\s*(?:import|export)\b(?!\s*\().*$/m);
    if (left) fail(`cannot convert: ${left[0]}`);
    const tail = functions.length ? `\nmodule.exports = { ${functions.join(", ")} };\n` : "";
    process.stdout.write(text + tail);' "$1"
}

# The nodejs glue `require`s the module's JS snippets (lock-wasm/src/wasm/*.js, ES modules):
# each becomes a CommonJS `.cjs` file next to it (to_cjs), and the glue requires that
# instead. Node before 20.19 cannot `require` an ES module, and later ones would warn.
snippets_to_cjs() {
  local dir="$1" glue="$2" file rel
  [ -d "$dir/snippets" ] || return 0
  while IFS= read -r file; do
    to_cjs "$file" >"${file%.js}.cjs" || return 1
    rm "$file"
    rel="${file#"$dir"/}"
    # The glue spells it require(String.raw`./snippets/...`).
    grep -qF "\`./$rel\`" "$glue" || { log "$glue does not require ./$rel"; return 1; }
    sed -i -e "s#\`./$rel\`#\`./${rel%.js}.cjs\`#" "$glue"
  done < <(find "$dir/snippets" -name '*.js')
}

# The Node glue sends through node:http(s): `lock-wasm/src/wasm/fetch-node.cjs` goes beside
# the CommonJS copy of `fetch.js` (which it keeps for Bun) and the glue requires it instead.
node_transport() {
  local dir="$1" glue="$2" fetch rel
  fetch="$(find "$dir/snippets" -name fetch.cjs)"
  [ -n "$fetch" ] || { log "no fetch.cjs snippet in $dir"; return 1; }
  cp "$root/lock-wasm/src/wasm/fetch-node.cjs" "${fetch%.cjs}-node.cjs"
  rel="${fetch#"$dir"/}"
  grep -qF "\`./$rel\`" "$glue" || { log "$glue does not require ./$rel"; return 1; }
  sed -i -e "s#\`./$rel\`#\`./${rel%.cjs}-node.cjs\`#" "$glue"
}

# The package's export names, comma-separated: the keys of the loaded CommonJS entry.
api_names() {
  node -e '
    const names = Object.keys(require(process.argv[1]));
    if (names.length === 0 || !names.every((n) => /^[A-Za-z_$][\w$]*$/.test(n))) {
      console.error("build-npm: bad export names: " + JSON.stringify(names));
      process.exit(1);
    }
    console.log(names.join(", "));' "$1"
}

# Copies an ESM entry with the export names written in at its `/* @api-names */` marker.
fill_names() {
  local names="$1" file="$2"
  grep -q '/\* @api-names \*/' "$file" || { log "no @api-names marker in $file"; return 1; }
  sed -e "s|/\* @api-names \*/|$names|" "$file"
}

assemble() {
  local sdk="$1" kit="$2" pkg="$out/package" src="$root/lock-wasm/npm"
  rm -rf "$pkg"
  mkdir -p "$pkg/node" "$pkg/web" "$pkg/testing/node" "$pkg/testing/web"
  bindgen "$sdk" nodejs "$pkg/node" lock_wasm
  snippets_to_cjs "$pkg/node" "$pkg/node/lock_wasm.js"
  node_transport "$pkg/node" "$pkg/node/lock_wasm.js"
  bindgen "$sdk" web "$pkg/web" lock_wasm
  bindgen "$kit" nodejs "$pkg/testing/node" lock_wasm_testkit
  snippets_to_cjs "$pkg/testing/node" "$pkg/testing/node/lock_wasm_testkit.js"
  bindgen "$kit" web "$pkg/testing/web" lock_wasm_testkit
  # One source for each JS layer file: the CommonJS copy differs only in its import and
  # export statements. api.js imports errors.js, so each build gets both.
  local file
  for file in errors api; do
    cp "$src/src/$file.js" "$pkg/web/$file.js"
    to_cjs "$src/src/$file.js" >"$pkg/node/$file.cjs"
  done
  cp "$src/src/testing.js" "$pkg/testing/web/testing.js"
  to_cjs "$src/src/testing.js" >"$pkg/testing/node/testing.cjs"
  cp "$src/src/node.cjs" "$pkg/node/index.cjs"
  # The OpenTelemetry layer, loaded by dynamic import (ESM in both builds).
  cp "$src/src/tracing.js" "$pkg/node/tracing.js"
  cp "$src/src/tracing.js" "$pkg/web/tracing.js"
  cp "$src/src/testing-node.cjs" "$pkg/testing/node/index.cjs"
  cp "$src/src/testing-node.mjs" "$pkg/testing/node/index.mjs"
  cp "$src/src/testing-web.js" "$pkg/testing/web/index.js"
  # The CommonJS glue must not be read as ESM under the package's "type": "module".
  mv "$pkg/node/lock_wasm.js" "$pkg/node/lock_wasm.cjs"
  mv "$pkg/testing/node/lock_wasm_testkit.js" "$pkg/testing/node/lock_wasm_testkit.cjs"
  # ESM needs its named exports spelled out; they are the keys of createApi()'s result
  # (the one list, in api.js), read from the CommonJS build just assembled.
  local names
  names="$(api_names "$pkg/node/index.cjs")"
  fill_names "$names" "$src/src/node.mjs" >"$pkg/node/index.mjs"
  fill_names "$names" "$src/src/web.js" >"$pkg/web/index.js"
  fill_names "$names" "$src/src/workerd.js" >"$pkg/web/workerd.js"
  cp "$src/package.json" "$src/index.d.ts" "$src/testing.d.ts" "$src/README.md" "$pkg/"
  local version
  version="$(awk -F'"' '/^version = /{print $2; exit}' Cargo.toml)"
  node -e '
    const fs = require("fs"); const f = process.argv[1];
    const p = JSON.parse(fs.readFileSync(f, "utf8")); p.version = process.argv[2];
    fs.writeFileSync(f, JSON.stringify(p, null, 2) + "\n");' "$pkg/package.json" "$version"
}

report_size() {
  local what="$1" f="$2" raw gz
  raw=$(stat -c %s "$f")
  gz=$(gzip -9 -c "$f" | wc -c)
  awk -v w="$what" -v r="$raw" -v g="$gz" 'BEGIN { printf "wasm size%s: %d bytes raw, %d bytes gzip -9 (%.1f KB)\n", w, r, g, g / 1024 }'
}

# The wasm target, the wasm-bindgen CLI of Cargo.lock and wasm-opt, as the run command
# installs them (idempotent: seconds when present).
bash scripts/setup.sh run >&2
mkdir -p "$out"
build_wasm wasm "$out/lock_wasm.wasm"
build_wasm testkit "$out/lock_wasm_testkit.wasm"
assemble "$out/lock_wasm.wasm" "$out/lock_wasm_testkit.wasm"
report_size "" "$out/package/web/lock_wasm_bg.wasm"
report_size " (test kit, lock-wasm/testing)" "$out/package/testing/web/lock_wasm_testkit_bg.wasm"
(cd "$out" && rm -f lock-wasm-*.tgz && npm pack --silent ./package >/dev/null)
ls "$out"/lock-wasm-*.tgz
