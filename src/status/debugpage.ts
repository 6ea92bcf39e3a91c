// The /debug/ page: one static HTML document whose inline script fetches /debug/config_dump every
// few seconds and renders it (identity and certificate timeline, xDS streams with versions and
// NACKs, readiness now and its history, Envoy, DNS, Wasm, log levels). No external assets: the
// status server sends it with a Content-Security-Policy that allows nothing else. Every value is
// written as text (textContent), never as markup: NACK reasons and metadata come from outside.

export const DEBUG_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agent debug</title>
<style>
  :root { --fg:#1d2330; --muted:#5b6475; --line:#d9dde5; --ok:#1f7a3f; --warn:#a86200; --bad:#b3261e; --bg:#f6f7f9; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
  header { padding: 12px 20px; background: #fff; border-bottom: 1px solid var(--line); display: flex; gap: 16px; align-items: baseline; flex-wrap: wrap; }
  header h1 { font-size: 18px; margin: 0; }
  main { padding: 12px 20px; display: grid; grid-template-columns: repeat(auto-fit, minmax(460px, 1fr)); gap: 14px; }
  section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; min-width: 0; }
  section.wide { grid-column: 1 / -1; }
  h2 { font-size: 15px; margin: 0 0 8px; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 3px 8px 3px 0; border-bottom: 1px solid var(--line); vertical-align: top; overflow-wrap: anywhere; }
  th { color: var(--muted); font-weight: 600; font-size: 12px; }
  dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
  dt { color: var(--muted); } dd { margin: 0; overflow-wrap: anywhere; }
  .badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px; font-weight: 600; color: #fff; background: var(--muted); }
  .ok { background: var(--ok); } .warn { background: var(--warn); } .bad { background: var(--bad); }
  .muted { color: var(--muted); } .err { color: var(--bad); }
  .tl { position: relative; height: 18px; background: #eef0f4; border-radius: 3px; margin: 2px 0 0; }
  .tldates { display: flex; justify-content: space-between; font-size: 12px; color: var(--muted); margin-bottom: 8px; }
  .tl .bar { position: absolute; top: 3px; bottom: 3px; border-radius: 2px; background: var(--ok); }
  .tl .bar.renewing { background: var(--warn); } .tl .bar.expired { background: var(--bad); }
  .tl .now { position: absolute; top: 0; bottom: 0; width: 2px; background: var(--fg); }
  code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
</style>
</head>
<body>
<header><h1>agent</h1><span id="who" class="muted">loading…</span><span id="ready"></span><span id="refreshed" class="muted"></span></header>
<main>
  <section><h2>Identity</h2><dl id="identity"></dl></section>
  <section><h2>Certificates</h2><div id="certs"></div></section>
  <section class="wide"><h2>xDS</h2><dl id="upstream"></dl><table id="streams"></table></section>
  <section><h2>Readiness</h2><div id="conditions"></div><h2 style="margin-top:10px">History</h2><table id="history"></table></section>
  <section><h2>Envoy</h2><dl id="envoy"></dl><h2 style="margin-top:10px">DNS and Wasm</h2><dl id="dnswasm"></dl><h2 style="margin-top:10px">Log levels</h2><div id="levels" class="muted"></div></section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = String(text); if (cls) e.className = cls; return e; }
function dl(target, pairs) { target.replaceChildren(); for (const [k, v] of pairs) { if (v === undefined || v === "") continue; target.append(el("dt", k)); const d = el("dd"); if (v instanceof Node) d.append(v); else d.textContent = String(v); target.append(d); } }
function table(target, head, rows) { target.replaceChildren(); const tr = el("tr"); for (const h of head) tr.append(el("th", h)); target.append(tr); for (const r of rows) { const row = el("tr"); for (const c of r) { const td = el("td"); if (c instanceof Node) td.append(c); else td.textContent = c === undefined ? "" : String(c); row.append(td); } target.append(row); } }
function badge(text, cls) { return el("span", text, "badge " + cls); }
function short(t) { return String(t).replace("type.googleapis.com/", "").replace(/^envoy\\.config\\.|^envoy\\.extensions\\./, ""); }
function ago(iso) { if (!iso) return ""; const s = Math.round((Date.now() - Date.parse(iso)) / 1000); return s < 120 ? s + "s ago" : s < 7200 ? Math.round(s / 60) + "m ago" : Math.round(s / 3600) + "h ago"; }
function dur(s) { const a = Math.abs(s); const t = a < 120 ? a + "s" : a < 7200 ? Math.round(a / 60) + "m" : a < 172800 ? Math.round(a / 3600) + "h" : Math.round(a / 86400) + "d"; return s < 0 ? t + " ago" : "in " + t; }
const stateClass = { valid: "ok", renewing: "warn", warming: "warn", expired: "bad", connected: "ok", connecting: "warn", idle: "warn", disconnected: "bad", running: "ok" };

function render(d) {
  const n = d.node;
  $("who").textContent = n.id;
  $("ready").replaceChildren(d.readiness.ready ? badge("ready", "ok") : badge("not ready: " + d.readiness.blockers.length + " pending", "bad"));
  $("refreshed").textContent = "updated " + new Date(d.generated).toLocaleTimeString();
  const id = d.identity;
  dl($("identity"), [
    ["SPIFFE", id.spiffeId], ["workload certificate", badge(id.workloadState, stateClass[id.workloadState] || "warn")],
    ["CA", d.ca.provider + (d.ca.address ? " " + d.ca.address : "")],
    ["last CA error", id.lastCaError ? el("span", id.lastCaError.message + " (" + ago(id.lastCaError.at) + ")", "err") : undefined],
    ["pod", n.podNamespace + "/" + n.podName], ["service account", n.serviceAccount], ["IPs", n.ips.join(", ")],
    ["agent", d.agent.version + ", pid " + d.agent.pid + ", up " + d.agent.uptimeSeconds + "s"],
  ]);
  const certs = $("certs"); certs.replaceChildren();
  if (id.certificates.length === 0) certs.append(el("div", "no certificate yet", "muted"));
  const now = Date.now();
  for (const c of id.certificates) {
    const nb = Date.parse(c.notBefore), na = Date.parse(c.notAfter);
    const head = el("div"); head.append(el("b", c.resource + " "), badge(c.state, stateClass[c.state] || "warn"), el("span", " " + (c.spiffeIds[0] || c.subject) + " · serial " + c.serial + " · expires " + dur(c.expiresInSeconds), "muted"));
    const tl = el("div", undefined, "tl"); const lo = Math.min(nb, now), hi = Math.max(na, now), span = Math.max(1, hi - lo);
    const bar = el("div", undefined, "bar " + c.state); bar.style.left = ((nb - lo) / span * 100) + "%"; bar.style.width = Math.max(0.5, (na - nb) / span * 100) + "%";
    const mark = el("div", undefined, "now"); mark.style.left = ((now - lo) / span * 100) + "%"; mark.title = "now";
    tl.append(bar, mark);
    const dates = el("div", undefined, "tldates"); dates.append(el("span", "issued " + c.notBefore.slice(0, 16).replace("T", " ") + " UTC"), el("span", "expires " + c.notAfter.slice(0, 16).replace("T", " ") + " UTC"));
    certs.append(head, tl, dates);
  }
  const x = d.xds;
  if (!x.enabled) { dl($("upstream"), [["xDS", "off"]]); $("streams").replaceChildren(); }
  else {
    const u = x.upstream;
    dl($("upstream"), [["upstream", u.address], ["state", badge(u.state, stateClass[u.state] || "warn")], ["since", u.since ? ago(u.since) : ""],
      ["last error", u.lastError ? el("span", u.lastError.message + " (code " + u.lastError.code + ", " + ago(u.lastError.at) + ")", "err") : undefined],
      ["streams opened", x.streamsOpened], ["stream", x.stream ? (x.stream.delta ? "Delta" : "SotW") + (x.stream.active ? ", active" : ", ended") + ", opened " + ago(x.stream.opened) : "none yet"]]);
    const rows = (x.stream ? x.stream.types : []).map((t) => [el("code", short(t.typeUrl)), t.lastVersion || "", el("code", t.lastNonce || ""),
      t.lastAck ? badge(t.lastAck, t.lastAck === "ACK" ? "ok" : "bad") : "",
      t.lastNack ? el("span", t.lastNack.reason + " (" + ago(t.lastNack.at) + ")", "err") : "",
      t.requests + " / " + t.responses, t.requestBytes + " / " + t.responseBytes]);
    table($("streams"), ["type", "version", "nonce", "last answer", "last NACK", "msgs up / down", "bytes up / down"], rows);
  }
  const r = d.readiness, cond = $("conditions"); cond.replaceChildren();
  if (r.blockers.length === 0 && r.warnings.length === 0) cond.append(el("div", "nothing pending", "muted"));
  for (const b of r.blockers) { const line = el("div"); line.append(badge("blocker", "bad"), el("span", " " + b.name + ": " + (b.lastError || "pending for " + b.pendingSeconds + "s"))); cond.append(line); }
  for (const w of r.warnings) { const line = el("div"); line.append(badge("warning", "warn"), el("span", " " + w.name + ": " + (w.lastError || "pending for " + w.pendingSeconds + "s"))); cond.append(line); }
  table($("history"), ["when", "condition", "event", "error"], r.history.slice(-30).reverse().map((h) => [new Date(h.at).toLocaleTimeString(), h.name + (h.gates ? "" : " (warning)"), h.event, h.error ? el("span", h.error, "err") : ""]));
  const e = d.envoy;
  dl($("envoy"), e.enabled ? [["state", badge(e.state, stateClass[e.state] || "warn")], ["pids", e.pids.join(", ") || "none"], ["restarts", e.restarts + " (policy " + e.restartPolicy + ")"], ["last exit", e.lastExit],
    ["drain", e.drainPlan.mode + ", " + (e.drainPlan.mode === "wait" ? e.drainPlan.terminationDrainMs + " ms" : "min " + e.drainPlan.minimumDrainMs + " ms")]] : [["Envoy", "not run by this agent"]]);
  dl($("dnswasm"), [["DNS table", d.dns.enabled ? d.dns.hosts + " hosts" + (d.dns.lastUpdate ? ", updated " + ago(d.dns.lastUpdate) : ", none yet") : "off"],
    ["Wasm modules", d.wasm.enabled ? String(d.wasm.modules.length) : "off"]]);
  $("levels").textContent = Object.entries(d.agent.logLevels).map(([k, v]) => k + ":" + v).join("  ");
}

async function refresh() {
  try {
    const res = await fetch("/debug/config_dump", { cache: "no-store" });
    if (!res.ok) throw new Error("HTTP " + res.status);
    render(await res.json());
  } catch (err) {
    $("refreshed").textContent = "refresh failed: " + err.message;
  }
  setTimeout(refresh, 2000);
}
refresh();
</script>
</body>
</html>
`;
