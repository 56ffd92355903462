// Writes FILE.br (Brotli, quality 11) and FILE.gz (gzip, level 9) beside each FILE given, for
// lock-server's static files to serve by Accept-Encoding without compressing per request.
//
//   node scripts/precompress.mjs www/pkg/bench_ui_bg.wasm www/pkg/bench_ui.js
//
// Node's own zlib: no compressor to install. A variant that would not be smaller than its
// file is not written (and an older one removed), so the server sends the file itself.
import { readFileSync, writeFileSync, rmSync } from "node:fs";
import { brotliCompressSync, gzipSync, constants } from "node:zlib";

for (const file of process.argv.slice(2)) {
  const body = readFileSync(file);
  const variants = {
    br: brotliCompressSync(body, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
        [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
      },
    }),
    gz: gzipSync(body, { level: 9 }),
  };
  const sizes = [];
  for (const [ext, packed] of Object.entries(variants)) {
    if (packed.length < body.length) {
      writeFileSync(`${file}.${ext}`, packed);
      sizes.push(`${ext} ${Math.ceil(packed.length / 1024)} KB`);
    } else {
      rmSync(`${file}.${ext}`, { force: true });
    }
  }
  console.log(`precompress: ${file} ${Math.ceil(body.length / 1024)} KB -> ${sizes.join(", ") || "kept as is"}`);
}
