// `bun run bench`: runs every benchmark module in bench/ (each exports `run(): Promise<string>`
// returning a Markdown section), prints the results and, with --write, records them in
// docs/BENCHMARKS.md with the machine and date. `bun run bench -- startup xds` runs a subset;
// `bun run bench -- podcost` is issue #29's per-pod cost, every target with met or missed.

import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { machine } from "./support.ts";

const args = process.argv.slice(2);
const write = args.includes("--write");
const only = args.filter((a) => !a.startsWith("--"));
const dir = import.meta.dir;
const modules = readdirSync(dir)
  .filter((f) => f.endsWith(".ts") && !["run.ts", "support.ts"].includes(f) && !f.includes("-"))
  .map((f) => f.replace(/\.ts$/, ""))
  .filter((name) => only.length === 0 || only.includes(name));

const sections: string[] = [];
for (const name of modules) {
  const mod = (await import(join(dir, `${name}.ts`))) as { run?: () => Promise<string> };
  if (typeof mod.run !== "function") continue;
  process.stderr.write(`bench: ${name}...\n`);
  try {
    const section = await mod.run();
    sections.push(section.trimEnd() + "\n");
    console.log(section);
  } catch (e) {
    const msg = `## ${name}\n\nfailed: ${(e as Error).message}\n`;
    sections.push(msg);
    console.log(msg);
  }
}
if (write) {
  const date = new Date().toISOString().slice(0, 10);
  const doc = [
    `# Benchmarks`,
    "",
    `Recorded ${date} on ${machine()} by \`bun run bench -- --write\`. Ratios compare side-by-side runs on the same machine in the same run; absolute numbers move with machine load.`,
    "",
    ...sections,
  ].join("\n");
  writeFileSync(join(dir, "..", "docs", "BENCHMARKS.md"), doc);
  process.stderr.write("bench: wrote docs/BENCHMARKS.md\n");
}
