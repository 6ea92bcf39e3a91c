import { describe, expect, test } from "bun:test";
import { caClientOptions, hostOf, rootCertForCa, type CaEnv } from "../../src/ca/options.ts";

const env = (over: Partial<CaEnv> = {}): CaEnv => ({
  CA_ADDR: "",
  CA_ROOT_CA: "",
  ISTIOD_SAN: "",
  PILOT_CERT_PROVIDER: "istiod",
  PROV_CERT: "",
  ISTIO_META_CLUSTER_ID: "",
  ISTIO_META_CERT_SIGNER: "",
  ...over,
});

describe("rootCertForCa (Istio's order)", () => {
  test.each([
    [{}, "./var/run/secrets/istio/root-cert.pem"],
    [{ CA_ROOT_CA: "SYSTEM" }, "SYSTEM"],
    [{ CA_ROOT_CA: "/x/root.pem", PROV_CERT: "/p" }, "/x/root.pem"],
    [{ PILOT_CERT_PROVIDER: "custom", PROV_CERT: "/p" }, "./etc/certs/root-cert.pem"],
    [{ PROV_CERT: "/p" }, "/p/root-cert.pem"],
  ])("%j -> %s", (over, want) => expect(rootCertForCa(env(over))).toBe(want));
  test("PILOT_CERT_PROVIDER=none is an error", () => expect(() => rootCertForCa(env({ PILOT_CERT_PROVIDER: "none" }))).toThrow("PILOT_CERT_PROVIDER=none"));
});

describe("caClientOptions", () => {
  test("defaults to the discovery address with TLS, server name from the host", () => {
    const o = caClientOptions(env(), {}, "istiod.istio-system.svc:15012", "/r");
    expect(o).toMatchObject({
      address: "istiod.istio-system.svc:15012",
      tls: true,
      serverName: "istiod.istio-system.svc",
      rootCertPath: "/r/var/run/secrets/istio/root-cert.pem",
    });
    expect(o.csrMetadata).toBeUndefined();
  });
  test("port 15010 is plaintext", () => {
    const o = caClientOptions(env({ CA_ADDR: "istiod:15010" }), {}, "x:15012");
    expect(o.tls).toBe(false);
    expect(o.rootCertPath).toBeUndefined();
  });
  test("ISTIOD_SAN applies only when CA_ADDR is unset", () => {
    expect(caClientOptions(env({ ISTIOD_SAN: "istiod.custom" }), {}, "10.0.0.1:15012").serverName).toBe("istiod.custom");
    expect(caClientOptions(env({ ISTIOD_SAN: "istiod.custom", CA_ADDR: "ca.example:443" }), {}, "x:15012").serverName).toBe("ca.example");
  });
  test("headers: ClusterID and CA_HEADER_*; CertSigner metadata; PROV_CERT client cert", () => {
    const o = caClientOptions(
      env({ ISTIO_META_CLUSTER_ID: "c1", ISTIO_META_CERT_SIGNER: "s", PROV_CERT: "/etc/certs" }),
      { CA_HEADER_X_Tenant: "t1", CA_HEADER_: "ignored", OTHER: "no" },
      "a:15012",
    );
    expect(o.headers).toEqual({ ClusterID: "c1", X_Tenant: "t1" });
    expect(o.csrMetadata).toEqual({ CertSigner: "s" });
    expect(o.clientCertPath).toBe("/etc/certs/cert-chain.pem");
    expect(o.clientKeyPath).toBe("/etc/certs/key.pem");
  });
  test("without ISTIO_META_CLUSTER_ID the ClusterID header is still sent, empty, as Istio's citadel client does", () => {
    expect(caClientOptions(env(), {}, "a:15012").headers).toEqual({ ClusterID: "" });
  });
  test("hostOf", () => {
    expect(hostOf("[::1]:15012")).toBe("::1");
    expect(hostOf("istiod:15012")).toBe("istiod");
  });
});
