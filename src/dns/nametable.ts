// The NDS name table (istio.networking.nds.v1.NameTable) as plain objects, and its decoding from the
// serialized bytes the xDS relay hands over. The schema is parsed once per codec from
// proto/nds.proto, embedded at bundle time.

import protobuf from "protobufjs";
import ndsProtoText from "../../proto/nds.proto" with { type: "text" };
import { DnsError } from "./errors.ts";
import { checkedInput } from "../lib/protobuf-input.ts";
import { errorMessage } from "../lib/errors.ts";

export const NAME_TABLE_TYPE_URL = "type.googleapis.com/istio.networking.nds.v1.NameTable";

export interface NameInfo {
  ips: string[];
  /** Service registry, e.g. `Kubernetes` or `External`. */
  registry: string;
  /** Kubernetes service name (registry `Kubernetes` only). */
  shortname: string;
  /** Kubernetes namespace (registry `Kubernetes` only). */
  namespace: string;
  /** Deprecated in Istio; still honoured. */
  altHosts: string[];
}

export interface NameTable {
  table: Record<string, NameInfo>;
}

/** A NameInfo with every field present (missing fields take proto3 defaults). */
export function nameInfo(partial: Partial<NameInfo>): NameInfo {
  return {
    ips: partial.ips ?? [],
    registry: partial.registry ?? "",
    shortname: partial.shortname ?? "",
    namespace: partial.namespace ?? "",
    altHosts: partial.altHosts ?? [],
  };
}

export interface NameTableCodec {
  decode(bytes: Uint8Array): NameTable;
  encode(table: NameTable): Uint8Array;
}

export function nameTableCodec(): NameTableCodec {
  const root = protobuf.parse(ndsProtoText as string, { keepCase: false }).root;
  const T = root.lookupType("istio.networking.nds.v1.NameTable");
  return {
    decode(bytes) {
      let msg: protobuf.Message;
      try {
        msg = T.decode(checkedInput(bytes));
      } catch (e) {
        throw new DnsError("nametable", `malformed istio.networking.nds.v1.NameTable (${bytes.length} bytes): ${errorMessage(e)}`, { cause: e });
      }
      const obj = T.toObject(msg, { arrays: true, objects: true, defaults: true }) as { table: Record<string, Partial<NameInfo>> };
      const table: Record<string, NameInfo> = {};
      for (const [host, info] of Object.entries(obj.table)) table[host] = nameInfo(info ?? {});
      return { table };
    },
    encode(table) {
      return T.encode(T.fromObject(table)).finish();
    },
  };
}
