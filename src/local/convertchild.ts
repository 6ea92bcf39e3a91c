// The converter's side (`<agent> __local-xds-convert <path as the user named it>`, started by
// converter.ts for each load of the file): the file's bytes on stdin in, its resources encoded by
// our Envoy schemas (or the rejection naming the file, the resource and the field) on stdout as
// one Conversion (convertwire.ts), exit 0. Only this process evaluates yaml, protobufjs and the
// schemas; it exits once it has written, so the serving agent keeps only the encoded bytes.
// Exit 2: used wrongly; 70: an unexpected failure (its stack on stderr).

import { LocalXdsError } from "./errors.ts";
import { encodeConversion } from "./convertwire.ts";
import { fileConverter } from "./inprocess.ts";
import { FILE_LIMITS } from "../lib/boundedfile.ts";

export interface ConvertChildIO {
  /** The file's bytes, as the agent read them (taken up to FILE_LIMITS.localXds). */
  input: ReadableStream<Uint8Array>;
  /** Resolves once `b` is written out. */
  write(b: Uint8Array): Promise<unknown>;
  err(s: string): void;
}

async function readCapped(input: ReadableStream<Uint8Array>, max: number): Promise<Buffer | undefined> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const c of input) {
    total += c.length;
    if (total > max) return undefined;
    chunks.push(c);
  }
  return Buffer.concat(chunks, total);
}

export async function runConvertChild(args: string[], io: ConvertChildIO): Promise<number> {
  const [displayPath] = args;
  if (args.length !== 1 || !displayPath) {
    io.err("usage: __local-xds-convert <path>: the file's text on stdin (run by the agent in local mode, not by hand)\n");
    return 2;
  }
  try {
    const bytes = await readCapped(io.input, FILE_LIMITS.localXds);
    let result;
    if (!bytes) result = new LocalXdsError(`${displayPath}: larger than ${FILE_LIMITS.localXds} bytes`, displayPath);
    else {
      try {
        result = fileConverter()(displayPath, bytes);
      } catch (e) {
        if (!(e instanceof LocalXdsError)) throw e;
        result = e;
      }
    }
    await io.write(encodeConversion(result));
    return 0;
  } catch (e) {
    io.err(`local xDS converter: ${(e as Error)?.stack ?? String(e)}\n`);
    return 70;
  }
}
