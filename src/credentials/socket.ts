// Istio's credential SDS socket check (agent.go checkSocket on ./var/run/secrets/credential-uds/socket):
// a non-regular file there that accepts a connection within 1 s means an external credential SDS
// server is present, and the node metadata gets `credential: "true"` (istiod then points
// credentialName secrets at it). One that does not answer is stale and removed; a removal that
// fails stops the start, as in Istio.

import { rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { CREDENTIAL_SOCKET_PATH, socketAnswers } from "../sds/external.ts";
import { CredentialError } from "./gce.ts";

export async function credentialSocketExists(root: string, timeoutMs = 1000): Promise<boolean> {
  const path = join(root, CREDENTIAL_SOCKET_PATH);
  let regular: boolean;
  try {
    regular = statSync(path).isFile();
  } catch {
    return false; // absent
  }
  if (regular) return false;
  if (await socketAnswers(path, timeoutMs)) return true;
  try {
    rmSync(path, { force: true });
  } catch (e) {
    throw new CredentialError(`existing SDS socket ${path} could not be removed: ${(e as Error).message}`, { cause: e });
  }
  return false;
}
