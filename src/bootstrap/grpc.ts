// The proxyless gRPC xDS bootstrap (Istio's pkg/istio-agent/grpcxds): always written to
// GRPC_XDS_BOOTSTRAP so gRPC applications in the pod can use the agent's XDS socket. Node
// metadata is the typed metadata only (as Istio marshals it) with GENERATOR=grpc; with
// OUTPUT_CERTS a file_watcher certificate provider points at the certificates the agent writes.

import { mkdirSync } from "node:fs";
import { atomicWriteFileSync } from "../lib/atomicwrite.ts";
import { dirname, posix } from "node:path";
import { typedMetadataJson, type BootstrapNode } from "../config/metadata.ts";
import { BootstrapError } from "./errors.ts";
import { goJsonIndent, goJsonMarshal } from "./gotemplate/json.ts";
import { errorMessage } from "../lib/errors.ts";

export const GRPC_SERVER_LISTENER_TEMPLATE = "xds.istio.io/grpc/lds/inbound/%s";

export interface GrpcBootstrapOptions {
  node: BootstrapNode;
  /** The agent's XDS socket as Istio names it (`./etc/istio/proxy/XDS`); empty = dial discoveryAddress. */
  xdsUdsPath: string;
  discoveryAddress: string;
  /** OUTPUT_CERTS; empty = no certificate provider. */
  certDir: string;
}

/** The file's JSON text (Go's json.MarshalIndent with two spaces). */
export function grpcBootstrapJson(opts: GrpcBootstrapOptions): string {
  const typed = { ...opts.node.typed, GENERATOR: "grpc" };
  const loc = opts.node.locality;
  const locality: Record<string, string> = {};
  if (loc.region) locality.region = loc.region;
  if (loc.zone) locality.zone = loc.zone;
  if (loc.subZone) locality.sub_zone = loc.subZone;
  const node = `{"id":${goJsonMarshal(opts.node.id)},"metadata":${goJsonMarshal(typedMetadataJson(typed))},"locality":${goJsonMarshal(locality)},"UserAgentVersionType":null}`;
  const serverUri = opts.xdsUdsPath ? `unix:///${opts.xdsUdsPath}` : opts.discoveryAddress;
  let certProviders = "";
  if (opts.certDir) {
    const config = `{"certificate_file":${goJsonMarshal(posix.join(opts.certDir, "cert-chain.pem"))},"private_key_file":${goJsonMarshal(posix.join(opts.certDir, "key.pem"))},"ca_certificate_file":${goJsonMarshal(posix.join(opts.certDir, "root-cert.pem"))},"refresh_interval":"900s"}`;
    certProviders = `,"certificate_providers":{"default":{"plugin_name":"file_watcher","config":${config}}}`;
  }
  const serverJson = `{"server_uri":${goJsonMarshal(serverUri)},"channel_creds":[{"type":"insecure"}],"server_features":["xds_v3"]}`;
  const compact = `{"xds_servers":[${serverJson}],"node":${node}${certProviders},"server_listener_resource_name_template":${goJsonMarshal(GRPC_SERVER_LISTENER_TEMPLATE)}}`;
  return goJsonIndent(compact);
}

/** Write `text` to `path` atomically (temp file in the same directory, then rename); synchronous: a few local syscalls at start. */
export async function atomicWrite(path: string, text: string, mode: number): Promise<void> {
  atomicWriteFileSync(path, text, mode);
}

/** Create the directory (0700) and write the gRPC bootstrap file (0644) atomically. */
export async function writeGrpcBootstrapFile(path: string, opts: GrpcBootstrapOptions): Promise<string> {
  const text = grpcBootstrapJson(opts);
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    await atomicWrite(path, text, 0o644);
  } catch (e) {
    throw new BootstrapError(`failed writing to ${path}: ${errorMessage(e)}`, path, { cause: e });
  }
  return text;
}
