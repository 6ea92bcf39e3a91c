// How the serving process turns the file's bytes into a snapshot without evaluating yaml,
// protobufjs or local mode's schemas (several MiB of private memory per pod, docs/memory.md): for
// each load of the file it starts a copy of itself (`<selfCommand> __local-xds-convert <path>`,
// convertchild.ts), writes the bytes to its stdin and reads back the encoded resources
// (convertwire.ts); the copy exits. Bounded: CONVERT_TIMEOUT_MS, then the copy is killed;
// CONVERT_OUTPUT_LIMIT bytes of output, past which the file is rejected.
//
// What a failure means:
// - the file is bad (the copy names the file, the resource and the field, as parsing in this
//   process did): a LocalXdsError, the last good snapshot stays (source.ts);
// - the copy could not do its job (killed at the deadline, crashed, output cut short): a
//   LocalXdsConvertError, not the file's fault: the same text is tried again (source.ts retries
//   with a backoff);
// - the copy cannot be started at all (ENOEXEC, ENOENT, EACCES from the spawn, or exit 127 with
//   nothing written: the arm64 binary under qemu-user cannot exec itself): a warning, and this
//   process converts the file itself from then on (inprocess.ts, loaded only then), the memory
//   this file is about included.

import { FILE_LIMITS, formatBytes } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";
import type { Logger } from "../lib/log.ts";
import { decodeConversion } from "./convertwire.ts";
import { LocalXdsError } from "./errors.ts";
import type { Snapshot } from "./snapshot.ts";

/** The hidden command the agent's entry point (src/main.ts) dispatches to convertchild.ts. */
export const LOCAL_XDS_CONVERT_COMMAND = "__local-xds-convert";
/** How long one conversion may take: the compiled binary takes ~0.1 s; under qemu or a loaded machine, seconds. */
export const CONVERT_TIMEOUT_MS = 60_000;
/** The most encoded output accepted for one file (twice the file's own limit: aliases can expand YAML). */
export const CONVERT_OUTPUT_LIMIT = 2 * FILE_LIMITS.localXds;
/** The tail of the copy's stderr kept for the message when it fails. */
const STDERR_KEPT = 2048;

/** The converter failed, not the file: nothing is cached against the text; it is tried again. */
export class LocalXdsConvertError extends LocalXdsError {
  override name = "LocalXdsConvertError";
}

/**
 * The file's bytes (as read) to its snapshot; throws LocalXdsError (the file) or
 * LocalXdsConvertError (the converter). `signal`: the agent is stopping (a copy still running is killed).
 */
export type Converter = (displayPath: string, bytes: Uint8Array, signal?: AbortSignal) => Promise<Snapshot>;

/** Converts in this process, its code and schemas loaded on the first call (tests, tools, the fallback). */
export function inProcessConverter(): Converter {
  let convert: ((displayPath: string, bytes: Uint8Array) => Snapshot) | undefined;
  return async (displayPath, bytes) => {
    convert ??= (await import("./inprocess.ts")).fileConverter();
    return convert(displayPath, bytes);
  };
}

export interface ChildConverterOptions {
  /** How to run this same program again (src/main.ts's selfCommand): the binary, or Bun and the script. */
  command: readonly string[];
  log: Logger;
  timeoutMs?: number;
  maxOutputBytes?: number;
}

/** Spawn errors that mean this program cannot run itself here at all (rather than "not now"). */
const CANNOT_RUN = new Set(["ENOEXEC", "ENOENT", "EACCES"]);
/** The exit status of a child whose exec failed after the fork. */
const EXEC_FAILED = 127;

/** Reads `stream` to its end, keeping at most `max` bytes: the last ones (`keepTail`), or none once past it (then `over()`, once). */
async function collect(stream: ReadableStream<Uint8Array>, max: number, over: () => void, keepTail = false): Promise<Buffer> {
  let chunks: Uint8Array[] = [];
  let total = 0;
  let past = false;
  for await (const c of stream) {
    if (past) continue;
    total += c.length;
    if (total <= max) chunks.push(c);
    else if (keepTail) {
      chunks = [Buffer.concat([...chunks, c]).subarray(-max)];
      total = max;
    } else {
      past = true;
      chunks = [];
      over();
    }
  }
  return Buffer.concat(chunks);
}

export function childConverter(opts: ChildConverterOptions): Converter {
  const timeoutMs = opts.timeoutMs ?? CONVERT_TIMEOUT_MS;
  const maxOutput = opts.maxOutputBytes ?? CONVERT_OUTPUT_LIMIT;
  const argv = (displayPath: string) => [...opts.command, LOCAL_XDS_CONVERT_COMMAND, displayPath];
  let fallback: Converter | undefined;
  return async (displayPath, bytes, signal) => {
    if (fallback) return fallback(displayPath, bytes);
    const what = `the converter (${[...opts.command, LOCAL_XDS_CONVERT_COMMAND].join(" ")})`;
    const failed = (why: string) => new LocalXdsConvertError(`${displayPath}: ${what} ${why}`, displayPath);
    const inProcess = (why: string) => {
      opts.log.warn(
        `local xDS: ${what} cannot be started here: ${why}; converting ${displayPath} in the agent's own process from now on (yaml, protobufjs and the schemas then stay loaded: several MiB more)`,
      );
      fallback = inProcessConverter();
      return fallback(displayPath, bytes);
    };
    if (signal?.aborted) throw failed("was not started: the agent is stopping");
    let proc: Bun.Subprocess<Uint8Array, "pipe", "pipe">;
    try {
      // No environment: the copy reads nothing but its stdin.
      proc = Bun.spawn(argv(displayPath), { stdin: bytes, stdout: "pipe", stderr: "pipe", env: {}, ...(signal ? { signal } : {}) });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (!code || !CANNOT_RUN.has(code)) throw failed(`could not be started: ${errorMessage(e)}`);
      return inProcess(errorMessage(e));
    }
    let timedOut = false;
    let overflow = false;
    const timer = setTimeout(() => {
      timedOut = true;
      proc.kill("SIGKILL");
    }, timeoutMs);
    const [out, err, code] = await Promise.all([
      collect(proc.stdout, maxOutput, () => {
        overflow = true;
        proc.kill("SIGKILL");
      }),
      collect(proc.stderr, STDERR_KEPT, () => undefined, true),
      proc.exited,
    ]).finally(() => clearTimeout(timer));
    if (overflow) {
      throw new LocalXdsError(
        `${displayPath}: its resources encode to more than ${formatBytes(maxOutput)} (the limit of one local xDS file's encoded resources); split or shorten it`,
        displayPath,
      );
    }
    if (timedOut) throw failed(`did not finish within ${timeoutMs / 1000} s and was killed`);
    if (signal?.aborted) throw failed("was stopped: the agent is stopping");
    // 127 with nothing written: the exec failed after the fork (how a spawn under qemu-user reports
    // ENOEXEC); the copy itself exits 0, 2 or 70.
    if (code === EXEC_FAILED && out.length === 0 && err.length === 0) return inProcess(`it exited with code ${EXEC_FAILED} before running (the exec failed)`);
    if (code !== 0) {
      const tail = err.toString("utf8").trim().split("\n").slice(-3).join(" | ");
      throw failed(`${proc.signalCode ? `was killed by ${proc.signalCode}` : `exited with code ${code}`}${tail ? `: ${tail}` : ""}`);
    }
    try {
      return decodeConversion(out, displayPath);
    } catch (e) {
      if (e instanceof LocalXdsError) throw e;
      throw failed(`wrote output that is not a conversion: ${errorMessage(e)}`);
    }
  };
}
