// The package README's code blocks, each with the runtime it runs in: the comment
// `<!-- runs: RUNTIME -->` on the line before its fence. Used by readme.test.mjs (which runs
// them) and by scripts/test-wasm.sh (`node readme-blocks.mjs FILE RUNTIME` prints the blocks
// of one runtime, for the build command it runs from the README).
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

/** The runtimes a block may name, and what runs it. */
export const RUNTIMES = {
  "sh-checkout": "bash in a checkout of the repository (scripts/test-wasm.sh's build step)",
  sh: "bash in a project with the tarball in vendor/",
  "node-esm": "node, as an .mjs file",
  "node-cjs": "node, as a .cjs file",
  "node-test": "node --test, as an .mjs file",
  bun: "bun, as an .mjs file",
  deno: "deno run, as an .mjs file",
  workerd: "workerd, as the Worker's module",
  browser: "headless Chromium, as the page",
};

/** Every fenced block: `{ runtime, lang, code, line }`; throws on a block without a runtime. */
export function readmeBlocks(text) {
  const lines = text.split("\n");
  const blocks = [];
  for (let i = 0; i < lines.length; i += 1) {
    // Outside a block every fence opens one (each block is skipped whole below).
    const fence = /^```(\w*)\s*$/.exec(lines[i]);
    if (!fence) continue;
    const marker = /^<!-- runs: ([\w-]+) -->$/.exec(lines[i - 1] ?? "");
    if (!marker) throw new Error(`README line ${i + 1}: a code block without <!-- runs: RUNTIME -->`);
    if (!(marker[1] in RUNTIMES)) throw new Error(`README line ${i}: unknown runtime ${marker[1]}`);
    const end = lines.indexOf("```", i + 1);
    if (end < 0) throw new Error(`README line ${i + 1}: an unclosed code block`);
    blocks.push({ runtime: marker[1], lang: fence[1], code: lines.slice(i + 1, end).join("\n") + "\n", line: i + 1 });
    i = end;
  }
  return blocks;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [file, runtime] = process.argv.slice(2);
  for (const block of readmeBlocks(readFileSync(file, "utf8"))) {
    if (block.runtime === runtime) process.stdout.write(block.code);
  }
}
