// Which SDS socket the agent serves (Istio's agent.go): if something already answers on the
// workload SDS socket (SPIRE, another agent), the agent serves only file certificates on
// ./var/run/secrets/credential-uds/files-socket and runs no CA client; a socket file nobody
// answers on is stale and removed; a non-default socket name that does not exist is an error.

import { connect } from "node:net";
import { existsSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { SdsError } from "./errors.ts";
import { errorMessage } from "../lib/errors.ts";

export const WORKLOAD_SDS_DIR = "./var/run/secrets/workload-spiffe-uds";
export const DEFAULT_SOCKET_FILE = "socket";
export const FILES_SOCKET_PATH = "./var/run/secrets/credential-uds/files-socket";
export const CREDENTIAL_SOCKET_PATH = "./var/run/secrets/credential-uds/socket";

export type SdsMode =
  /** Serve everything on the workload socket. */
  | { kind: "workload"; socketPath: string }
  /** An external SDS server owns the workload socket; serve file certificates only here. */
  | { kind: "files-only"; socketPath: string; externalSocket: string };

/** True when a process accepts connections on the Unix socket at `path` within `timeoutMs`. */
export function socketAnswers(path: string, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path);
    const t = setTimeout(() => {
      s.destroy();
      resolve(false);
    }, timeoutMs);
    s.once("connect", () => {
      clearTimeout(t);
      s.destroy();
      resolve(true);
    });
    s.once("error", () => {
      clearTimeout(t);
      resolve(false);
    });
  });
}

export async function detectSdsMode(root: string, socketFile: string, timeoutMs = 1000): Promise<SdsMode> {
  if (socketFile === "" || socketFile === "." || socketFile === "..")
    throw new SdsError(`WORKLOAD_IDENTITY_SOCKET_FILE: "${socketFile}" must be a file name, not a path`);
  if (socketFile.includes("/")) throw new SdsError(`WORKLOAD_IDENTITY_SOCKET_FILE: "${socketFile}" must be a file name, not a path`);
  const socketPath = join(root, WORKLOAD_SDS_DIR, socketFile);
  const filesSocket = join(root, FILES_SOCKET_PATH);
  if (existsSync(socketPath)) {
    if (statSync(socketPath).isSocket() && (await socketAnswers(socketPath, timeoutMs))) {
      return { kind: "files-only", socketPath: filesSocket, externalSocket: socketPath };
    }
    rmSync(socketPath, { force: true }); // stale: nobody answers
    if (socketFile !== DEFAULT_SOCKET_FILE) {
      throw new SdsError(`WORKLOAD_IDENTITY_SOCKET_FILE=${socketFile}: ${socketPath} exists but no SDS server answers on it`);
    }
    return { kind: "workload", socketPath };
  }
  if (socketFile !== DEFAULT_SOCKET_FILE) {
    throw new SdsError(
      `WORKLOAD_IDENTITY_SOCKET_FILE=${socketFile}: no SDS server socket at ${socketPath} (a custom socket name needs an external SDS server)`,
    );
  }
  return { kind: "workload", socketPath };
}

/**
 * Istio's credential SDS socket check at start (./var/run/secrets/credential-uds/socket): a live
 * socket adds the node metadata `credential: "true"`; a socket file nobody answers on is stale and
 * removed. Returns whether a live socket is there.
 */
export async function detectCredentialSocket(root: string, timeoutMs = 1000): Promise<boolean> {
  const path = join(root, CREDENTIAL_SOCKET_PATH);
  if (!existsSync(path)) return false;
  if (statSync(path).isSocket() && (await socketAnswers(path, timeoutMs))) return true;
  try {
    rmSync(path, { force: true });
  } catch (e) {
    throw new SdsError(`existing credential SDS socket ${path} could not be removed: ${errorMessage(e)}`, undefined, { cause: e });
  }
  return false;
}
