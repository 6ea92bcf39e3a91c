// Cases found by mutation testing (npm run mutate -- dns): the wildcard walk's steps and bounds,
// names repeated across entries, search domains with a trailing dot, result shapes, and the
// NameTable defaults. Expected addresses and names are literals.

import { describe, expect, test } from "bun:test";
import type { HostEntry } from "../../src/dns/althosts.ts";
import { DnsError } from "../../src/dns/errors.ts";
import { formatIp, parseIp } from "../../src/dns/ip.ts";
import { buildLookupTable, TYPE_A, TYPE_AAAA } from "../../src/dns/lookup.ts";
import { NAME_TABLE_TYPE_URL, nameInfo, nameTableCodec } from "../../src/dns/nametable.ts";

function entry(names: string[], ips: string[]): HostEntry {
  const parsed = ips.map((t) => parseIp(t)!);
  return {
    source: names[0]!,
    info: nameInfo({ ips }),
    names: new Set(names),
    v4: parsed.filter((p) => p.family === 4),
    v6: parsed.filter((p) => p.family === 6),
  };
}

const text = (addrs: Uint8Array[] | undefined) => addrs?.map((b) => formatIp({ family: b.length === 4 ? 4 : 6, bytes: b }));

describe("lookup table: the wildcard walk", () => {
  const t = buildLookupTable([entry(["*.example."], ["10.0.0.1"]), entry(["*foo.example."], ["10.0.0.2"]), entry(["*."], ["10.0.0.3"])], []);

  test("size counts every name", () => {
    expect(t.size).toBe(3);
    expect(buildLookupTable([], []).size).toBe(0);
  });

  test("a name two labels below the wildcard's parent walks past the first parent", () => {
    expect(text(t.lookup(TYPE_A, "a.b.example.")?.addresses)).toEqual(["10.0.0.1"]);
  });

  test("wildcards are tried at label boundaries only: `*foo.example.` matches neither foo.example. nor x.foo.example.", () => {
    expect(text(t.lookup(TYPE_A, "foo.example.")?.addresses)).toEqual(["10.0.0.1"]);
    expect(text(t.lookup(TYPE_A, "x.foo.example.")?.addresses)).toEqual(["10.0.0.1"]);
  });

  test("a wildcard over the root (`*.`) is never consulted", () => {
    expect(t.lookup(TYPE_A, "other.")).toBeUndefined();
    expect(t.lookup(TYPE_A, "a.other.")).toBeUndefined();
  });

  test("a direct answer carries no cname keys at all", () => {
    const r = buildLookupTable([entry(["plain."], ["10.0.0.9"])], []).lookup(TYPE_A, "plain.")!;
    expect(Object.keys(r)).toEqual(["addresses"]);
  });
});

describe("lookup table: building", () => {
  test("a name in two entries keeps the v4 of one and the v6 of the other, in either order", () => {
    const v4first = buildLookupTable([entry(["dup."], ["10.1.1.1"]), entry(["dup."], ["fd00::1"])], []);
    const v6first = buildLookupTable([entry(["dup."], ["fd00::1"]), entry(["dup."], ["10.1.1.1"])], []);
    for (const t of [v4first, v6first]) {
      expect(text(t.lookup(TYPE_A, "dup.")?.addresses)).toEqual(["10.1.1.1"]);
      expect(text(t.lookup(TYPE_AAAA, "dup.")?.addresses)).toEqual(["fd00::1"]);
    }
  });

  test("a search domain written with its trailing dot expands the same as without", () => {
    for (const search of ["ns1.svc.cluster.local.", "ns1.svc.cluster.local"]) {
      const r = buildLookupTable([entry(["db."], ["10.2.2.2"])], [search]).lookup(TYPE_A, "db.ns1.svc.cluster.local.");
      expect(r?.cname).toBe("db.");
      expect(text(r?.addresses)).toEqual(["10.2.2.2"]);
    }
  });
});

describe("NameTable", () => {
  test("the type URL istiod sends", () => {
    expect(NAME_TABLE_TYPE_URL).toBe("type.googleapis.com/istio.networking.nds.v1.NameTable");
  });

  test("nameInfo fills proto3 defaults", () => {
    expect(nameInfo({})).toEqual({ ips: [], registry: "", shortname: "", namespace: "", altHosts: [] });
  });

  test("malformed bytes are a DnsError of kind nametable", () => {
    let err: unknown;
    try {
      nameTableCodec().decode(new Uint8Array([0x0a, 0x05, 0x01]));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DnsError);
    expect((err as DnsError).kind).toBe("nametable");
  });
});
