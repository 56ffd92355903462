// Summary statistics of the npm benchmarks (bench.mjs, bench-otel.mjs): a Markdown table of
// latency samples in milliseconds.
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
export const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
export const p50 = (xs) => pct(xs, 0.5);

/** Prints the table of `rows` (`[name, samples]`). */
export function printTable(rows) {
  console.log("| client | cycles | mean ms | p50 ms | p99 ms |");
  console.log("|---|---|---|---|---|");
  for (const [name, xs] of rows) {
    console.log(`| ${name} | ${xs.length} | ${mean(xs).toFixed(3)} | ${p50(xs).toFixed(3)} | ${pct(xs, 0.99).toFixed(3)} |`);
  }
}
