// Preloaded into an agent run from source (`bun --preload <this> src/main.ts ...`) by
// test/cli/lazy-loading.test.ts: when the process exits, writes the path of every module it
// evaluated, one a line, to $AGENT_TEST_LOADED_MODULES. Bun's require.cache lists ES modules too.

import { writeFileSync } from "node:fs";

const out = process.env.AGENT_TEST_LOADED_MODULES;
if (out) process.on("exit", () => writeFileSync(out, Object.keys(require.cache).sort().join("\n") + "\n"));
