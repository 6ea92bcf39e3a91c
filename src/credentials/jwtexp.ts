// The `exp` claim of a JWT, read without verifying it (the token is only passed on; its issuer
// checks it). Used to know when a cached token must be fetched again.

/** Expiry in ms since the epoch, or undefined when the token has no readable `exp`. */
export function jwtExpiryMs(token: string): number | undefined {
  const parts = token.trim().split(".");
  if (parts.length !== 3 || parts[1]!.length > 16 * 1024) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8"));
    const exp = claims?.exp;
    return typeof exp === "number" && Number.isFinite(exp) && exp > 0 ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}
