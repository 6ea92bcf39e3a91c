// ISTIO_BOOTSTRAP_OVERRIDE (Istio's readBootstrapToJSON in pkg/envoy/proxy.go): a YAML or JSON
// file merged by Envoy over the bootstrap via `--config-yaml <json>`. `$(HOST_IP)` is replaced by
// HOST_IP (bracketed when it is IPv6, without doubling brackets the user already wrote).

import { yamlLib } from "../lib/yaml.ts";
import { BootstrapError } from "./errors.ts";
import { goJsonMarshal } from "./gotemplate/json.ts";
import { FILE_LIMITS, readBoundedText } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";

/** Pure part: substitute HOST_IP and convert YAML/JSON text to compact JSON with sorted keys. */
export function bootstrapOverrideToJson(text: string, hostIp: string, source = "ISTIO_BOOTSTRAP_OVERRIDE"): string {
  let host = hostIp;
  let body = text;
  if (host.includes(":")) {
    host = `[${host}]`;
    body = body.split("[$(HOST_IP)]").join(host);
  }
  body = body.split("$(HOST_IP)").join(host);
  let doc: unknown;
  try {
    doc = yamlLib().parse(body);
  } catch (e) {
    throw new BootstrapError(`failed to convert to JSON: ${source}: ${errorMessage(e)}`, source, { cause: e });
  }
  return goJsonMarshal(doc ?? null);
}

/** Read the override file; the error names the file. */
export async function readBootstrapOverride(path: string, hostIp: string): Promise<string> {
  let text: string;
  try {
    text = await readBoundedText(path, { maxBytes: FILE_LIMITS.config });
  } catch (e) {
    throw new BootstrapError(`failed to read file: ${path}, ${errorMessage(e)}`, path, { cause: e });
  }
  return bootstrapOverrideToJson(text, hostIp, path);
}
