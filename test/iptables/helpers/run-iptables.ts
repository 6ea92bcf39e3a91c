// Test helper: the `agent iptables` command as a process (argv after the script).
import { runIptables } from "../../../src/cli/iptables.ts";
const code = await runIptables(process.argv.slice(2), process.env, { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s) });
process.exit(code);
