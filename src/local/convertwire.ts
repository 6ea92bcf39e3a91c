// What the file's converter (convertchild.ts, a short-lived copy of the agent) hands back to the
// serving process: the file's resources already encoded, or why the file was rejected. Written
// and read at the protobuf wire level (src/lib/protowire.ts) as a message of our own, so neither
// side needs a schema for it:
//
//   Conversion { repeated Converted resources = 1; Rejection rejected = 2; string end = 3 }
//   Converted  { string type_url = 1; string name = 2; bytes body = 3 }
//   Rejection  { string message = 1; string resource = 2 }
//
// `end` is written last and holds the number of resources in decimal, so output cut short at a
// field boundary is refused rather than taken for a smaller file.

import { MessageWriter, parseFields, stringField, WireError, type WireField } from "../lib/protowire.ts";
import { LocalXdsError } from "./errors.ts";
import { RESOURCE_KINDS, typeUrlOf } from "./kinds.ts";
import { makeResource, makeSnapshot, type Resource, type Snapshot } from "./snapshot.ts";

const CONVERSION = { resources: 1, rejected: 2, end: 3 } as const;
const CONVERTED = { typeUrl: 1, name: 2, body: 3 } as const;
const REJECTION = { message: 1, resource: 2 } as const;

const SERVED: ReadonlySet<string> = new Set(RESOURCE_KINDS.map(typeUrlOf));

/** A converted file (every resource of the snapshot) or its rejection, as the converter writes it. */
export function encodeConversion(result: Snapshot | LocalXdsError): Buffer {
  const w = new MessageWriter();
  let count = 0;
  if (result instanceof LocalXdsError) {
    const r = new MessageWriter().bytes(REJECTION.message, result.message);
    if (result.resource) r.bytes(REJECTION.resource, result.resource);
    w.message(CONVERSION.rejected, r);
  } else {
    for (const [typeUrl, resources] of result.types) {
      for (const x of resources.values()) {
        w.message(CONVERSION.resources, new MessageWriter().bytes(CONVERTED.typeUrl, typeUrl).bytes(CONVERTED.name, x.name).bytes(CONVERTED.body, x.body));
        count++;
      }
    }
  }
  return w.bytes(CONVERSION.end, String(count)).finish();
}

function bytesOf(f: WireField, what: string): Uint8Array {
  if (f.wire !== 2) throw new WireError(`${what} should be length-delimited`);
  return f.data;
}

/**
 * The converter's output as a snapshot (resource bodies copied out of `b`, versions computed
 * here); throws the file's LocalXdsError when it was rejected, a WireError when the output is not
 * a whole Conversion.
 */
export function decodeConversion(b: Uint8Array, displayPath: string): Snapshot {
  const byType = new Map<string, Resource[]>(RESOURCE_KINDS.map((k) => [typeUrlOf(k), []]));
  const seen = new Set<string>();
  let rejected: LocalXdsError | undefined;
  let end: string | undefined;
  let count = 0;
  for (const f of parseFields(b)) {
    if (end !== undefined) throw new WireError(`field ${f.no} after the end of the conversion`);
    if (f.no === CONVERSION.resources) {
      const fields = parseFields(bytesOf(f, "Conversion.resources"));
      const typeUrl = stringField(fields, CONVERTED.typeUrl) ?? "";
      const name = stringField(fields, CONVERTED.name) ?? "";
      const body = fields.findLast((x) => x.no === CONVERTED.body);
      if (!SERVED.has(typeUrl)) throw new WireError(`resource ${count} has type ${JSON.stringify(typeUrl)}, not one a local file holds`);
      if (!name) throw new WireError(`resource ${count} of type ${typeUrl} has no name`);
      if (seen.has(`${typeUrl}\0${name}`)) throw new WireError(`${typeUrl} ${JSON.stringify(name)} twice`);
      seen.add(`${typeUrl}\0${name}`);
      // A copy: the output buffer is not kept alive by one of its resources.
      byType.get(typeUrl)!.push(makeResource(name, body ? Uint8Array.prototype.slice.call(bytesOf(body, "Converted.body")) : new Uint8Array(0)));
      count++;
    } else if (f.no === CONVERSION.rejected) {
      const fields = parseFields(bytesOf(f, "Conversion.rejected"));
      const resource = stringField(fields, REJECTION.resource);
      rejected = new LocalXdsError(stringField(fields, REJECTION.message) ?? `${displayPath}: rejected`, displayPath, resource || undefined);
    } else if (f.no === CONVERSION.end) {
      end = stringField([f], CONVERSION.end);
    }
  }
  if (end === undefined) throw new WireError("the conversion has no end (output cut short)");
  if (end !== String(count)) throw new WireError(`the conversion ends after ${end} resources but carries ${count}`);
  if (rejected) throw rejected;
  return makeSnapshot(byType);
}
