// `agent version [--short|-s] [-o json|yaml]`, shaped like Istio's pkg/version cobra command:
//   text:   client version: version.BuildInfo{Version:"…", GitRevision:"…", GolangVersion:"…", BuildStatus:"…", GitTag:"…"}
//   short:  client version: <version>
//   json:   {"clientVersion": {version, revision, golang_version, status, tag, <ours>}} indented by two
//   yaml:   the same document with keys sorted (sigs.k8s.io/yaml goes through a map), then a blank line
// There is no Go here: golang_version/GolangVersion carry the runtime the binary was built with
// (e.g. bun1.2.3), so scripts that read the field still find it; runtime_version says the same
// under a name of our own.

import { stringify } from "yaml";
import { parseFlags, type FlagSpec } from "../lib/flags.ts";
import { CliError, type CliIO } from "./io.ts";
import { buildInfo, type BuildInfo } from "../version.ts";

export const VERSION_FLAGS: FlagSpec[] = [
  { name: "short", short: "s", type: "bool", default: false, usage: "Use --short=false to generate full version information" },
  { name: "output", short: "o", type: "string", default: "", usage: "One of 'yaml' or 'json'." },
];

/** Go's `%#v` of version.BuildInfo, then ours: the Istio release and commit this build stands in for. */
export function longForm(info: BuildInfo): string {
  const q = (s: string) => JSON.stringify(s);
  return `version.BuildInfo{Version:${q(info.version)}, GitRevision:${q(info.revision)}, GolangVersion:${q(info.runtime)}, BuildStatus:${q(info.status)}, GitTag:${q(info.version)}, IstioVersion:${q(info.istioVersion)}, IstioRevision:${q(info.istioCommit)}}`;
}

/** The clientVersion object: Istio's keys in Istio's order, then ours. */
export function clientVersion(info: BuildInfo): Record<string, string> {
  return {
    version: info.version,
    revision: info.revision,
    golang_version: info.runtime,
    status: info.status,
    tag: info.version,
    runtime_version: info.runtime,
    istio_version: info.istioVersion,
    istio_revision: info.istioCommit,
  };
}

function sortKeys(o: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

export function runVersion(argv: string[], io: CliIO, info: BuildInfo = buildInfo()): number {
  const { values } = parseFlags(argv, VERSION_FLAGS, { allowUnknown: false });
  const output = String(values.output);
  if (output !== "" && output !== "json" && output !== "yaml") throw new CliError(`--output must be 'yaml' or 'json'`);
  if (output === "json") io.out(JSON.stringify({ clientVersion: clientVersion(info) }, null, 2) + "\n");
  else if (output === "yaml") io.out(stringify({ clientVersion: sortKeys(clientVersion(info)) }) + "\n");
  else if (values.short) io.out(`client version: ${info.version}\n`);
  else io.out(`client version: ${longForm(info)}\n`);
  return 0;
}
