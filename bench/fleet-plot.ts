// The propagation CDF of bench/fleet.ts as a self-contained SVG: one panel per xDS mode, one line
// per (agent, change size), latency on a log axis, fraction of (change, pod) ACKs on the other.

export interface CdfSeries {
  label: string;
  color: string;
  dashed: boolean;
  /** Latencies in ms. */
  values: number[];
}

export interface CdfPanel {
  title: string;
  series: CdfSeries[];
}

const W = 460;
const H = 320;
const M = { l: 52, r: 16, t: 30, b: 44 };
/** Coordinates to 0.1 px: the file stays small with thousands of points. */
const r1 = (v: number) => Math.round(v * 10) / 10;
const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");

function panel(p: CdfPanel, x0: number, lo: number, hi: number): string {
  const pw = W - M.l - M.r;
  const ph = H - M.t - M.b;
  const lx = (v: number) => r1(x0 + M.l + ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * pw);
  const ly = (f: number) => r1(M.t + (1 - f) * ph);
  const out: string[] = [`<text x="${x0 + W / 2}" y="18" text-anchor="middle" font-weight="bold">${esc(p.title)}</text>`];
  out.push(`<rect x="${x0 + M.l}" y="${M.t}" width="${pw}" height="${ph}" fill="none" stroke="#999"/>`);
  for (let d = Math.ceil(Math.log10(lo)); d <= Math.floor(Math.log10(hi)); d++) {
    const v = 10 ** d;
    out.push(`<line x1="${lx(v)}" x2="${lx(v)}" y1="${M.t}" y2="${M.t + ph}" stroke="#ddd"/>`);
    out.push(`<text x="${lx(v)}" y="${M.t + ph + 16}" text-anchor="middle">${v >= 1000 ? `${v / 1000} s` : `${v} ms`}</text>`);
  }
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    out.push(`<line x1="${x0 + M.l}" x2="${x0 + M.l + pw}" y1="${ly(f)}" y2="${ly(f)}" stroke="#eee"/>`);
    out.push(`<text x="${x0 + M.l - 6}" y="${ly(f) + 4}" text-anchor="end">${f}</text>`);
  }
  out.push(`<text x="${x0 + M.l + pw / 2}" y="${H - 8}" text-anchor="middle">change at istiod → pod ACKed it (log scale)</text>`);
  p.series.forEach((s, i) => {
    const v = [...s.values].sort((a, b) => a - b);
    if (v.length === 0) return;
    const pts: string[] = [`${lx(v[0]!)},${ly(0)}`];
    v.forEach((x, j) => {
      pts.push(`${lx(x)},${ly(j / v.length)}`, `${lx(x)},${ly((j + 1) / v.length)}`);
    });
    out.push(`<polyline fill="none" stroke="${s.color}" stroke-width="1.8"${s.dashed ? ' stroke-dasharray="5,3"' : ""} points="${pts.join(" ")}"/>`);
    const ky = M.t + 14 + i * 16;
    out.push(
      `<line x1="${x0 + M.l + 8}" x2="${x0 + M.l + 30}" y1="${ky - 4}" y2="${ky - 4}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5,3"' : ""}/>`,
    );
    out.push(`<text x="${x0 + M.l + 34}" y="${ky}">${esc(s.label)} (n=${v.length})</text>`);
  });
  return out.join("\n");
}

/** The SVG text of the panels side by side; `note` goes under them. */
export function cdfSvg(panels: CdfPanel[], note: string): string {
  const all = panels.flatMap((p) => p.series.flatMap((s) => s.values)).filter((v) => v > 0);
  const lo = 10 ** Math.floor(Math.log10(Math.max(1, Math.min(...all))));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...all, 10)));
  const width = W * panels.length;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${H + 22}" viewBox="0 0 ${width} ${H + 22}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    ...panels.map((p, i) => panel(p, i * W, lo, hi)),
    `<text x="8" y="${H + 14}" fill="#555">${esc(note)}</text>`,
    "</svg>",
    "",
  ].join("\n");
}
