// `agent version [--short|-s] [-o json|yaml]`, shaped like Istio's pkg/version cobra command.

import { stringify } from "yaml";
import { parseFlags, type FlagSpec } from "./flags.ts";
import { CliError, type CliIO } from "./io.ts";
import { buildInfo } from "../version.ts";

export const VERSION_FLAGS: FlagSpec[] = [
  { name: "short", short: "s", type: "bool", default: false, usage: "Use --short=false to generate full version information" },
  { name: "output", short: "o", type: "string", default: "", usage: "One of 'yaml' or 'json'." },
];

export function runVersion(argv: string[], io: CliIO): number {
  const { values } = parseFlags(argv, VERSION_FLAGS, { allowUnknown: false });
  const info = buildInfo();
  const output = String(values.output);
  if (output !== "" && output !== "json" && output !== "yaml") throw new CliError(`--output must be 'yaml' or 'json'`);
  if (output) {
    const doc = { clientVersion: { version: info.version, revision: info.revision, runtime_version: info.runtime, status: info.status, tag: info.version, istio_version: info.istioVersion, istio_revision: info.istioCommit } };
    io.out(output === "json" ? JSON.stringify(doc, null, 2) + "\n" : stringify(doc));
    return 0;
  }
  if (values.short) io.out(`${info.version}\n`);
  else io.out(`version.BuildInfo{Version:"${info.version}", GitRevision:"${info.revision}", RuntimeVersion:"${info.runtime}", BuildStatus:"${info.status}", GitTag:"${info.version}", IstioVersion:"${info.istioVersion}", IstioRevision:"${info.istioCommit}"}\n`);
  return 0;
}
