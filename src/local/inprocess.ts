// The file converted inside the calling process (yaml, protobufjs and the schemas loaded into it
// and kept): what the converter child runs (convertchild.ts), and the serving process's own way
// only where it cannot start that child (converter.ts) or was built without one (tests, tools).

import { ProtoJson } from "./protojson.ts";
import { localSchema } from "./schema.ts";
import type { Snapshot } from "./snapshot.ts";
import { parseXdsFile } from "./xdsfile.ts";

/** A converter with its own schemas: the file's bytes (UTF-8, as read) to a snapshot, or the file's LocalXdsError. */
export function fileConverter(): (displayPath: string, bytes: Uint8Array) => Snapshot {
  const pj = new ProtoJson(localSchema());
  return (displayPath, bytes) => parseXdsFile(displayPath, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8"), pj);
}
