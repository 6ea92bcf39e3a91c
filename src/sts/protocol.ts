// The OAuth 2.0 token exchange (RFC 8693) as the agent's Security Token Service speaks it on
// `--stsPort` (Istio's security/pkg/stsservice, removed in Istio #51110): the request Envoy posts,
// its validation in Istio's order with Istio's messages, and the JSON bodies of the answers, laid
// out as Go's json.MarshalIndent writes them. Pure: no I/O.

import { errorMessage } from "../lib/errors.ts";

export const TOKEN_PATH = "/token";
/** The status dump path (Istio's StsStatusPath). */
export const STATUS_PATH = "/stsStatus";
export const URL_ENCODED_FORM = "application/x-www-form-urlencoded";
export const TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
/** The only subject token type accepted. */
export const JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt";
export const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";
/** A request's form: a subject token is a few KiB (Istio read up to 10 MiB). */
export const STS_FORM_CAP = 64 * 1024;

/** RFC 6749 section 5.2 error codes Istio used: the request is bad (400) / no token could be issued (500). */
export type StsErrorCode = "invalid_request" | "invalid_target";

/** The parameters of RFC 8693 section 2.1 (Istio's StsRequestParameters). */
export interface StsRequest {
  grantType: string;
  resource: string;
  audience: string;
  scope: string;
  requestedTokenType: string;
  subjectToken: string;
  subjectTokenType: string;
  actorToken: string;
  actorTokenType: string;
}

export type StsValidation = { ok: true; request: StsRequest } | { ok: false; reason: string };

/** Go's url.ParseQuery, strict as it is: bad escapes and `;` separators are errors. */
export function parseForm(body: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of body.split("&")) {
    if (part === "") continue;
    if (part.includes(";")) throw new Error("invalid semicolon separator in query");
    const eq = part.indexOf("=");
    const [rawKey, rawValue] = eq < 0 ? [part, ""] : [part.slice(0, eq), part.slice(eq + 1)];
    const key = unescapeQuery(rawKey);
    if (!out.has(key)) out.set(key, unescapeQuery(rawValue));
  }
  return out;
}

function unescapeQuery(s: string): string {
  const bad = /%(?![0-9a-fA-F]{2})(.{0,2})/.exec(s);
  if (bad) throw new Error(`invalid URL escape "%${bad[1]}"`);
  return Buffer.from(decodeURIComponentBytes(s.replace(/\+/g, " "))).toString("utf8");
}

/** Percent-decoding to bytes (decodeURIComponent rejects escapes that are not UTF-8; Go does not). */
function decodeURIComponentBytes(s: string): Uint8Array {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "%") {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      for (const b of Buffer.from(s[i]!, "utf8")) bytes.push(b);
    }
  }
  return Uint8Array.from(bytes);
}

/** Istio's validateStsRequest: the checks and their messages, in its order. */
export function validateStsRequest(method: string, contentType: string | null, body: string): StsValidation {
  if (method !== "POST") return { ok: false, reason: `request method is invalid, should be POST but get ${method}` };
  if ((contentType ?? "") !== URL_ENCODED_FORM) {
    return { ok: false, reason: `request content type is invalid, should be ${URL_ENCODED_FORM} but get ${contentType ?? ""}` };
  }
  let form: Map<string, string>;
  try {
    form = parseForm(body);
  } catch (e) {
    return { ok: false, reason: `failed to parse query from STS request: ${errorMessage(e)}` };
  }
  const get = (k: string) => form.get(k) ?? "";
  if (get("grant_type") !== TOKEN_EXCHANGE_GRANT) {
    return { ok: false, reason: `request query grant_type is invalid, should be ${TOKEN_EXCHANGE_GRANT} but get ${get("grant_type")}` };
  }
  if (get("subject_token") === "") return { ok: false, reason: "subject_token is empty" };
  if (get("subject_token_type") !== JWT_TOKEN_TYPE) {
    return { ok: false, reason: `subject_token_type is invalid, should be ${JWT_TOKEN_TYPE} but get ${get("subject_token_type")}` };
  }
  return {
    ok: true,
    request: {
      grantType: get("grant_type"),
      resource: get("resource"),
      audience: get("audience"),
      scope: get("scope"),
      requestedTokenType: get("requested_token_type"),
      subjectToken: get("subject_token"),
      subjectTokenType: get("subject_token_type"),
      actorToken: get("actor_token"),
      actorTokenType: get("actor_token_type"),
    },
  };
}

/** JSON as Go's json.MarshalIndent writes it: `<`, `>`, `&`, U+2028 and U+2029 escaped. */
export function goJsonIndent(value: unknown, indent: string): string {
  return JSON.stringify(value, null, indent).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** RFC 8693 section 2.2.2 error body (Istio's StsErrorResponse, two-space indent). */
export function errorBody(code: StsErrorCode, description: string): string {
  return goJsonIndent({ error: code, error_description: description, error_uri: "" }, "  ");
}

/** The HTTP status Istio answered each error code with. */
export function errorStatus(code: StsErrorCode): number {
  return code === "invalid_request" ? 400 : 500;
}

/** RFC 8693 section 2.2.1 success body (Istio's StsResponseParameters, one-space indent). */
export function successBody(accessToken: string, expiresInSec: number): string {
  return goJsonIndent(
    { access_token: accessToken, issued_token_type: ACCESS_TOKEN_TYPE, token_type: "Bearer", expires_in: expiresInSec, scope: "", refresh_token: "" },
    " ",
  );
}

/** Go's time.Time JSON form (RFC3339Nano, UTC): fractional seconds without trailing zeros. */
export function goTimeJson(ms: number): string {
  const iso = new Date(ms).toISOString(); // 2024-01-02T03:04:05.120Z
  return iso.replace(/\.(\d{3})Z$/, (_, f: string) => (/^0+$/.test(f) ? "Z" : `.${f.replace(/0+$/, "")}Z`));
}
