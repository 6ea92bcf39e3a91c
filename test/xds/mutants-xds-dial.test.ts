// The upstream dial (xds/dial.ts) against real local servers, with certificates made by openssl (a
// root, a server certificate for istiod.test, localhost, 127.0.0.1 and ::1, a client certificate,
// and a second root nobody signed with), and gRPC status parsing (xds/grpcstatus.ts) against the
// literals of gRPC's PROTOCOL-HTTP2.md, http-grpc-status-mapping.md and statuscodes.md.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import tls from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dialSocket, serverNameOptions, type DialTarget } from "../../src/xds/dial.ts";
import { codeName, decodeGrpcMessage, httpStatusToCode, resetStatus, trailerStatus } from "../../src/xds/grpcstatus.ts";
import { OPENSSL } from "../ca/openssl.ts";
import { describeRequiring } from "../support/requires.ts";

describe("gRPC status codes and their names (statuscodes.md)", () => {
  test("every code 0-16 by its name; others as the number", () => {
    const names = [
      "OK",
      "CANCELLED",
      "UNKNOWN",
      "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",
      "NOT_FOUND",
      "ALREADY_EXISTS",
      "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION",
      "ABORTED",
      "OUT_OF_RANGE",
      "UNIMPLEMENTED",
      "INTERNAL",
      "UNAVAILABLE",
      "DATA_LOSS",
      "UNAUTHENTICATED",
    ];
    for (let i = 0; i < names.length; i++) expect(`${i} ${codeName(i)}`).toBe(`${i} ${names[i]}`);
    expect(codeName(17)).toBe("17");
    expect(codeName(99)).toBe("99");
    expect(codeName(-1)).toBe("-1");
  });

  test("HTTP status of a non-gRPC answer (http-grpc-status-mapping.md)", () => {
    const table: [number, number][] = [
      [400, 13],
      [401, 16],
      [403, 7],
      [404, 12],
      [429, 14],
      [502, 14],
      [503, 14],
      [504, 14],
      [200, 2],
      [500, 2],
      [405, 2],
    ];
    for (const [http, code] of table) expect(`${http} -> ${httpStatusToCode(http)}`).toBe(`${http} -> ${code}`);
  });

  test("a stream reset by HTTP/2 error code (PROTOCOL-HTTP2.md: errors)", () => {
    // REFUSED_STREAM (7) UNAVAILABLE, CANCEL (8) CANCELLED, ENHANCE_YOUR_CALM (11) RESOURCE_EXHAUSTED,
    // INADEQUATE_SECURITY (12) PERMISSION_DENIED; the rest (NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR...) UNAVAILABLE.
    const table: [number, number][] = [
      [7, 14],
      [8, 1],
      [11, 8],
      [12, 7],
      [0, 14],
      [1, 14],
      [2, 14],
    ];
    for (const [h2, code] of table) expect(resetStatus(h2, `reason ${h2}`)).toEqual({ code, message: `reason ${h2}` });
  });

  test("grpc-message is percent-decoded; an invalid escape is shown as sent", () => {
    expect(decodeGrpcMessage("not%20found%3A%20%E2%82%AC")).toBe("not found: €");
    expect(decodeGrpcMessage("100%25 done")).toBe("100% done");
    expect(decodeGrpcMessage("bad %zz escape")).toBe("bad %zz escape");
    expect(decodeGrpcMessage("cut %E2%82")).toBe("cut %E2%82");
    expect(decodeGrpcMessage(["first%21", "second"])).toBe("first!");
    expect(decodeGrpcMessage([])).toBe("");
    expect(decodeGrpcMessage(undefined)).toBe("");
  });

  test("the status in trailers: grpc-status digits only, else UNKNOWN; grpc-message decoded", () => {
    expect(
      trailerStatus([
        ["grpc-status", "5"],
        ["grpc-message", "no%20such%20secret"],
      ]),
    ).toEqual({ code: 5, message: "no such secret" });
    expect(trailerStatus([["grpc-status", "0"]])).toEqual({ code: 0, message: "" });
    expect(trailerStatus([["grpc-status", "14"]])).toEqual({ code: 14, message: "" });
    expect(trailerStatus([[":status", "200"]])).toEqual({ code: 2, message: "" });
    for (const bad of ["", "x1", "1x", "-1", " 3", "3.0"]) expect(trailerStatus([["grpc-status", bad]]).code).toBe(2);
  });
});

describe("the server name a dial asks for", () => {
  // A certificate as node:tls hands it to checkServerIdentity (only the fields it reads).
  const certFor = (san: string) => ({ subject: { CN: "x" }, subjectaltname: san }) as unknown as tls.PeerCertificate;

  test("none: no option (the host dialed is the name)", () => {
    expect(serverNameOptions("")).toEqual({});
  });
  test("a DNS name is sent as SNI and checked by TLS itself", () => {
    expect(serverNameOptions("istiod.istio-system.svc")).toEqual({ servername: "istiod.istio-system.svc" });
  });
  test("an IP address: no SNI, the certificate checked against that IP (not the host dialed)", () => {
    for (const ip of ["10.0.0.1", "fd00::1"]) {
      const o = serverNameOptions(ip);
      expect(o.servername).toBeUndefined();
      expect(typeof o.checkServerIdentity).toBe("function");
      const san = ip.includes(":") ? "IP Address:FD00:0:0:0:0:0:0:1" : "IP Address:10.0.0.1";
      expect(o.checkServerIdentity!("192.0.2.9", certFor(san))).toBeUndefined();
      const err = o.checkServerIdentity!("192.0.2.9", certFor("IP Address:192.0.2.9"));
      expect(err?.message).toBe(`Hostname/IP does not match certificate's altnames: IP: ${ip} is not in the cert's list: 192.0.2.9`);
    }
  });
});

interface Pki {
  ca: Buffer;
  otherCa: Buffer;
  srvCert: Buffer;
  srvKey: Buffer;
  cliCert: Buffer;
  cliKey: Buffer;
}

function openssl(dir: string, args: string[]): void {
  const r = spawnSync("openssl", args, { cwd: dir, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`openssl ${args.join(" ")}: ${r.stderr}`);
}

function makePki(dir: string): Pki {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  openssl(dir, ["req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/O=dial test/CN=dial root"]);
  openssl(dir, ["req", "-x509", ...ec, "-keyout", "other.key", "-out", "other.pem", "-days", "2", "-subj", "/O=dial test/CN=other root"]);
  writeFileSync(join(dir, "srv.ext"), "subjectAltName=DNS:istiod.test,DNS:localhost,IP:127.0.0.1,IP:::1\n");
  writeFileSync(join(dir, "cli.ext"), "subjectAltName=URI:spiffe://cluster.local/ns/dial/sa/client\n");
  for (const [name, cn] of [
    ["srv", "istiod.test"],
    ["cli", "dial client"],
  ] as const) {
    openssl(dir, ["req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${cn}`]);
    openssl(dir, [
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${name}.pem`,
      "-days",
      "2",
      "-extfile",
      `${name}.ext`,
    ]);
  }
  const f = (n: string) => readFileSync(join(dir, n));
  return { ca: f("ca.pem"), otherCa: f("other.pem"), srvCert: f("srv.pem"), srvKey: f("srv.key"), cliCert: f("cli.pem"), cliKey: f("cli.key") };
}

/** What a TLS server saw of one connection. */
interface Seen {
  sni: string | false | undefined;
  alpn: string | false | undefined;
  clientCn: string | undefined;
  protocol: string | null;
  cipher: string;
  data: string;
}

describeRequiring(OPENSSL, "dialing the upstream (TLS against openssl's certificates)", () => {
  let dir: string;
  let pki: Pki;
  let server: tls.Server;
  let port: number;
  const seen: Seen[] = [];
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "dial-"));
    pki = makePki(dir);
    server = tls.createServer({ cert: pki.srvCert, key: pki.srvKey, ca: pki.ca, requestCert: true, rejectUnauthorized: false, ALPNProtocols: ["h2"] }, (s) => {
      const peer = s.getPeerCertificate();
      const entry: Seen = {
        sni: (s as unknown as { servername?: string | false }).servername,
        alpn: s.alpnProtocol ?? undefined,
        clientCn: peer && peer.subject ? String(peer.subject.CN) : undefined,
        protocol: s.getProtocol(),
        cipher: s.getCipher().name,
        data: "",
      };
      seen.push(entry);
      s.on("data", (d) => {
        entry.data += d.toString();
        if (entry.data.endsWith("\n")) s.end(`echo ${entry.data}`);
      });
      s.on("error", () => {});
    });
    await new Promise<void>((r) => server.listen(0, "::", r));
    port = (server.address() as net.AddressInfo).port;
  });

  afterAll(() => {
    for (const s of sockets) s.destroy();
    server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Dial, send one line, and collect the echo or the error. */
  async function exchange(t: DialTarget): Promise<{ echo?: string; err?: NodeJS.ErrnoException; socket: net.Socket; seen?: Seen }> {
    const before = seen.length;
    const socket = dialSocket(t);
    sockets.push(socket);
    socket.write("ping\n");
    return new Promise((resolve) => {
      let echo = "";
      socket.on("data", (d) => (echo += d.toString()));
      socket.on("error", (err) => resolve({ err, socket }));
      socket.on("end", () => resolve({ echo, socket, ...(seen.length > before ? { seen: seen[seen.length - 1] } : {}) }));
    });
  }

  const tlsTo = (over: Partial<DialTarget["tls"]> & { host?: string } = {}): DialTarget => {
    const { host, ...o } = over;
    return { host: host ?? "127.0.0.1", port, tls: { ca: pki.ca, servername: "istiod.test", compliancePolicy: "", ...o } };
  };

  test("TLS: ALPN h2 offered and chosen, the DNS server name sent as SNI, the client certificate presented", async () => {
    const r = await exchange(tlsTo({ cert: pki.cliCert, key: pki.cliKey }));
    expect(r.err).toBeUndefined();
    expect(r.echo).toBe("echo ping\n");
    expect((r.socket as tls.TLSSocket).alpnProtocol).toBe("h2");
    expect(r.seen).toMatchObject({ sni: "istiod.test", alpn: "h2", clientCn: "dial client", protocol: "TLSv1.3" });
  });

  test("TLS without a client certificate: none presented", async () => {
    const r = await exchange(tlsTo());
    expect(r.echo).toBe("echo ping\n");
    expect(r.seen?.clientCn).toBeUndefined();
  });

  test("no server name: the host dialed is sent and checked", async () => {
    const r = await exchange(tlsTo({ host: "localhost", servername: "" }));
    expect(r.echo).toBe("echo ping\n");
    expect(r.seen?.sni).toBe("localhost");
  });

  test("a server name the certificate does not carry is refused", async () => {
    const r = await exchange(tlsTo({ servername: "other.test" }));
    expect(r.err?.code).toBe("ERR_TLS_CERT_ALTNAME_INVALID");
    expect(r.err?.message).toBe(
      "Hostname/IP does not match certificate's altnames: Host: other.test. is not in the cert's altnames: DNS:istiod.test, DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1",
    );
  });

  test("an IP server name: no SNI, checked against the certificate's IP SANs, not against the host dialed", async () => {
    const ok = await exchange(tlsTo({ servername: "127.0.0.1" }));
    expect(ok.echo).toBe("echo ping\n");
    expect(ok.seen?.sni).toBeFalsy();
    const v6 = await exchange(tlsTo({ host: "[::1]", servername: "::1" }));
    expect(v6.echo).toBe("echo ping\n");
    const wrong = await exchange(tlsTo({ servername: "10.1.2.3" }));
    expect(wrong.err?.code).toBe("ERR_TLS_CERT_ALTNAME_INVALID");
    expect(wrong.err?.message).toContain("IP: 10.1.2.3 is not in the cert's list: 127.0.0.1, ::1");
  });

  test("roots: the given one only; none given = the system store (which does not know this root)", async () => {
    const other = await exchange(tlsTo({ ca: pki.otherCa }));
    expect(other.err?.code).toBe("SELF_SIGNED_CERT_IN_CHAIN");
    const system = await exchange({ host: "127.0.0.1", port, tls: { servername: "istiod.test", compliancePolicy: "" } });
    expect(system.err?.code).toBe("SELF_SIGNED_CERT_IN_CHAIN");
  });

  test("COMPLIANCE_POLICY=fips-140-2 holds the connection to TLS 1.2 and its suites", async () => {
    const r = await exchange(tlsTo({ compliancePolicy: "fips-140-2" }));
    expect(r.echo).toBe("echo ping\n");
    expect(r.seen?.protocol).toBe("TLSv1.2");
    expect(r.seen?.cipher).toBe("ECDHE-ECDSA-AES128-GCM-SHA256");
  });

  test("plaintext: the bytes go as written (no TLS record), to a bracketed or bare IPv6 address too", async () => {
    const got: string[] = [];
    const plain = net.createServer((s) => {
      s.on("data", (d) => {
        got.push(d.toString("latin1"));
        s.end("pong\n");
      });
    });
    await new Promise<void>((r) => plain.listen(0, "::1", r));
    const p = (plain.address() as net.AddressInfo).port;
    try {
      for (const host of ["[::1]", "::1"]) {
        const s = dialSocket({ host, port: p });
        sockets.push(s);
        expect(s instanceof tls.TLSSocket).toBe(false);
        s.write("hello\n");
        const reply = await new Promise<string>((resolve, reject) => {
          let b = "";
          s.on("data", (d) => (b += d.toString()));
          s.on("end", () => resolve(b));
          s.on("error", reject);
        });
        expect(reply).toBe("pong\n");
      }
      expect(got).toEqual(["hello\n", "hello\n"]);
    } finally {
      plain.close();
    }
  });

  test("Nagle is off on the dialed socket (TCP_NODELAY, as gRPC sets it)", () => {
    for (const t of [{ host: "127.0.0.1", port }, tlsTo()]) {
      const s = dialSocket(t);
      sockets.push(s);
      s.on("error", () => {});
      // Bun (1.4) keeps the setting under this symbol; no public getter exists.
      const sym = Object.getOwnPropertySymbols(s).find((x) => String(x) === "Symbol(kSetNoDelay)");
      expect(sym, "Bun's socket no longer records setNoDelay under Symbol(kSetNoDelay)").toBeDefined();
      expect((s as unknown as Record<symbol, unknown>)[sym!]).toBe(true);
    }
  });
});
