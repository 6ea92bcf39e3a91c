// A probe from another process while this one's event loop is held: curl is spawned, then this
// thread spins for `holdMs` (as a burst of work holds it), then curl's answer is read. A server on
// this thread's loop could only answer after the spin; one on a thread of its own answers at once.

export interface HeldProbe {
  body: string;
  /** The HTTP status as curl printed it ("000" when there was no answer). */
  code: string;
  /** curl's time_total: how long the answer took. */
  seconds: number;
}

/** GET `url` with curl (5 s at most) while the event loop is held for `holdMs`. */
export async function curlWhileHeld(url: string, holdMs = 1500): Promise<HeldProbe> {
  const curl = Bun.spawn(["curl", "-s", "-w", "\\n%{http_code} %{time_total}", "--max-time", "5", url], { stdout: "pipe" });
  const until = performance.now() + holdMs;
  while (performance.now() < until) {
    /* the event loop is held */
  }
  const out = await new Response(curl.stdout).text();
  const cut = out.lastIndexOf("\n");
  const [code, seconds] = out.slice(cut + 1).split(" ");
  return { body: out.slice(0, Math.max(cut, 0)), code: code ?? "", seconds: Number(seconds) };
}
