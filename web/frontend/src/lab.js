// The lab page: one xterm.js terminal per lab node over a websocket, a live chart of the
// workload's bus bandwidth, the answer form (evidence picker, checks that keep the lab
// running, the final submission), hints opened in place, and the TTL countdown.
// The server renders the page, in the UI language (every text here comes from data-*
// attributes it wrote); this script only makes it live, and the page still works as
// plain forms without it.
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import uPlot from "uplot";
import "@xterm/xterm/css/xterm.css";
import "uplot/dist/uPlot.min.css";
import "./lab.css";

const page = document.querySelector("[data-lab-session]");
if (page) start(page);
// An instructor watching a learner: the same terminals, read-only.
const watch = document.querySelector("[data-watch]");
if (watch) document.querySelectorAll("[data-terminal]").forEach((el) => terminal(el, watch.dataset.watch, true));

function start(page) {
  const session = page.dataset.labSession;
  const running = page.dataset.running === "true";
  const terms = [...document.querySelectorAll("[data-terminal]")].map((el) => terminal(el, `/lab/${session}`));
  terminalTools(terms);
  const chartEl = document.querySelector("#busbw-chart");
  if (chartEl) chart(chartEl, session, running);
  countdown(document.querySelector("[data-expires]"));
  evidencePicker(document.querySelector("#evidence-picker"), session);
  confirmButtons();
  answerForm(document.querySelector("#answer"), session);
  hints(session);
  if (running && page.dataset.confirmed !== "true") pollState(page, session, terms.length > 0);
}

function wsURL(path) {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${location.host}${path}`;
}

// confirmButtons asks before the buttons that end something (stop, final submit, give up).
function confirmButtons() {
  document.querySelectorAll("button[data-confirm]").forEach((b) =>
    b.addEventListener("click", (e) => { if (!confirm(b.dataset.confirm)) e.preventDefault(); }));
}

const fontKey = "commlab.termfont";
const minCols = 80; // narrower screens scroll the terminal sideways instead

// terminal connects an xterm.js terminal to a node's shell and reconnects after a blip;
// the server replays the scrollback on every connect, so the screen is rebuilt. base is
// the path the terminal's socket hangs under; a read-only terminal sends nothing.
function terminal(el, base, readonly = false) {
  const node = el.dataset.terminal;
  const box = el.closest(".term-box");
  const status = box?.querySelector(".term-status");
  const term = new Terminal({
    cursorBlink: !readonly, disableStdin: readonly, fontSize: Number(localStorage.getItem(fontKey)) || 14, scrollback: 5000, convertEol: false,
    screenReaderMode: localStorage.getItem("commlab.sr") === "1",
    fontFamily: '"JetBrains Mono", Menlo, Consolas, "Liberation Mono", "Noto Sans Mono CJK SC", monospace',
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(el);
  const refit = () => {
    fit.fit();
    if (term.cols < minCols) term.resize(minCols, term.rows);
  };
  refit();
  el.commlabTerm = term; // for tests and the screen-reader switch
  let ws = null, backoff = 500, closedByServer = false;
  const setStatus = (s, cls) => { if (status) { status.textContent = s; status.className = "term-status " + (cls || ""); } };
  const send = (obj) => { if (!readonly && ws && ws.readyState === 1) ws.send(JSON.stringify(obj)); };
  const connect = () => {
    setStatus(el.dataset.connecting, "wait");
    ws = new WebSocket(wsURL(`${base}/term/${encodeURIComponent(node)}/ws`));
    ws.binaryType = "arraybuffer";
    el.commlabWS = ws; // tests drop it to check reconnects
    ws.onopen = () => {
      backoff = 500;
      term.reset();
      setStatus(el.dataset.connected, "ok");
      send({ type: "resize", cols: term.cols, rows: term.rows });
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data === "string") {
        const msg = JSON.parse(ev.data);
        if (msg.type === "idle-warning" || msg.type === "notice") setStatus(msg.text, "warn");
        if (msg.type === "closed") { closedByServer = true; setStatus(msg.text, "bad"); }
        return;
      }
      term.write(new Uint8Array(ev.data));
    };
    ws.onclose = () => {
      if (closedByServer) return;
      setStatus(el.dataset.reconnecting, "warn");
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 8000);
    };
  };
  const enc = new TextEncoder();
  term.onData((d) => { if (!readonly && ws && ws.readyState === 1) ws.send(enc.encode(d)); });
  term.onResize(({ cols, rows }) => send({ type: "resize", cols, rows }));
  new ResizeObserver(refit).observe(el);
  connect();

  const max = box?.querySelector(".term-max");
  max?.addEventListener("click", () => {
    const on = !box.classList.contains("max");
    document.querySelectorAll(".term-box.max").forEach((b) => {
      b.classList.remove("max");
      const m = b.querySelector(".term-max");
      m.textContent = m.dataset.max; m.setAttribute("aria-pressed", "false");
    });
    box.classList.toggle("max", on);
    box.parentElement.classList.toggle("has-max", on);
    max.textContent = on ? max.dataset.restore : max.dataset.max;
    max.setAttribute("aria-pressed", String(on));
    term.focus();
  });
  return { term, refit };
}

// terminalTools sizes the text of every terminal (kept across visits).
function terminalTools(terms) {
  document.querySelectorAll("[data-font]").forEach((b) => b.addEventListener("click", () => {
    for (const { term, refit } of terms) {
      term.options.fontSize = Math.min(24, Math.max(10, term.options.fontSize + Number(b.dataset.font)));
      localStorage.setItem(fontKey, String(term.options.fontSize));
      refit();
    }
  }));
}

// chart draws busbw over time from the metrics websocket. A failed run is a gap, not a
// zero joined to its neighbours; the moment the fault appeared is a marker that names
// no fault. A text readout under the chart says the same for screen readers.
function chart(el, session, running) {
  const xs = [], ys = [], events = [];
  const fmt = (v) => (v == null ? "–" : v === 0 ? "0" : Number(v.toPrecision(3)).toString());
  const opts = {
    width: el.clientWidth || 600, height: 220,
    series: [{ label: el.dataset.time }, { label: el.dataset.label, stroke: "#0b5cad", width: 2, spanGaps: false, points: { show: true, size: 4 } }],
    // Lab links run at Mbit/s, so busbw is a few hundredths of a GB/s: keep 3 significant digits.
    axes: [{ label: el.dataset.time }, { label: "GB/s", size: 70, values: (u, vals) => vals.map(fmt) }],
    scales: { x: { time: true }, y: { range: (u, lo, hi) => [0, Math.max(hi || 0, 0.001) * 1.15] } },
    hooks: { draw: [(u) => drawEvents(u, events, el.dataset.fault)] },
  };
  const plot = new uPlot(opts, [xs, ys], el);
  new ResizeObserver(() => plot.setSize({ width: el.clientWidth, height: 220 })).observe(el);
  const readout = document.querySelector("#chart-readout");
  const say = () => {
    if (!readout) return;
    const vals = ys.filter((v) => v != null);
    if (xs.length === 0) { readout.textContent = el.dataset.nodata; return; }
    const last = ys[ys.length - 1];
    let text = printf(el.dataset.readout, fmt(vals[0]), last == null ? el.dataset.failed : fmt(last), String(xs.length));
    if (events.length) text += " " + printf(el.dataset.faultat, new Date(events[0].t * 1000).toLocaleTimeString());
    readout.textContent = text;
  };
  let ended = !running;
  const connect = () => {
    const ws = new WebSocket(wsURL(`/lab/${session}/metrics/ws`));
    ws.onmessage = (ev) => {
      const m = JSON.parse(ev.data);
      if (m.type === "ended") { ended = true; return; }
      if (m.type === "sample") {
        xs.push(m.t); ys.push(m.busbw > 0 ? m.busbw : null);
        if (xs.length > 600) { xs.shift(); ys.shift(); }
      }
      if (m.type === "event") events.push(m);
      plot.setData([xs, ys]);
      el.dataset.samples = String(xs.length);
      say();
    };
    ws.onclose = () => { if (!ended) setTimeout(connect, 2000); };
  };
  connect();
}

function printf(format, ...args) {
  let i = 0;
  return (format || "").replace(/%[sd]/g, () => args[i++] ?? "");
}

function drawEvents(u, events, label) {
  const ctx = u.ctx;
  ctx.save();
  for (const e of events) {
    const x = u.valToPos(e.t, "x", true);
    if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
    ctx.strokeStyle = "#c62828";
    ctx.setLineDash([4, 4]);
    ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
    ctx.fillStyle = "#c62828";
    ctx.font = `${Math.round(12 * devicePixelRatio)}px sans-serif`;
    ctx.fillText(label || "", x + 4, u.bbox.top + 14 * devicePixelRatio);
  }
  ctx.restore();
}

// countdown shows the time left before the lab expires and warns in the last 5 minutes.
// The end is read again each second: an instructor's extension moves it.
function countdown(el) {
  if (!el) return;
  const tick = () => {
    const s = Math.max(0, Math.round((Date.parse(el.dataset.expires) - Date.now()) / 1000));
    el.textContent = `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
    el.classList.toggle("warn", s < 300);
    if (s > 0) setTimeout(tick, 1000);
  };
  tick();
}

// evidencePicker lists the commands run in this lab's terminals (from the server's own
// recordings) so the learner can pick the outputs that show the fault.
function evidencePicker(el, session) {
  if (!el) return;
  const refresh = async () => {
    const r = await fetch(`/lab/${session}/commands`, { headers: { Accept: "application/json" } });
    if (!r.ok) return;
    const { commands } = await r.json();
    const picked = new Set([...el.querySelectorAll("input:checked")].map((i) => i.value));
    el.replaceChildren(...commands.map((c) => {
      const id = `${c.terminal}#${c.seq}`;
      const label = document.createElement("label");
      label.className = "evidence";
      const box = document.createElement("input");
      box.type = "checkbox"; box.name = "evidence"; box.value = id; box.checked = picked.has(id);
      const head = document.createElement("code");
      head.textContent = `${id}  ${c.line}`;
      const out = document.createElement("pre");
      out.textContent = c.output;
      label.append(box, head, out);
      return label;
    }));
    if (commands.length === 0) el.textContent = el.dataset.empty || "";
  };
  el.commlabRefresh = refresh;
  document.querySelector("#refresh-evidence")?.addEventListener("click", refresh);
  refresh();
}

// answerForm: "check" grades in place and the lab goes on (the form keeps what was
// filled in); the final submission is a plain post that ends the lab.
function answerForm(form, session) {
  if (!form) return;
  const check = form.querySelector("#check-answer");
  check?.addEventListener("click", async (e) => {
    e.preventDefault();
    if (!form.reportValidity()) return;
    const label = check.textContent;
    check.disabled = true; check.textContent = check.dataset.busy;
    try {
      const r = await fetch(`/lab/${session}/check`, { method: "POST", body: new FormData(form), headers: { Accept: "application/json" } });
      const out = document.querySelector("#check");
      const body = await r.json().catch(() => ({}));
      if (!r.ok) { out.replaceChildren(para(body.error || r.statusText, "error")); return; }
      showCheck(out, body);
      if (body.checks_left > 0) check.textContent = label.replace(/\d+/, String(body.checks_left));
      else check.remove();
    } finally {
      if (check.isConnected) { check.disabled = false; if (check.textContent === check.dataset.busy) check.textContent = label; }
    }
  });
  form.addEventListener("submit", (e) => {
    if (e.defaultPrevented) return;
    const b = form.querySelector("#submit-answer");
    if (b) { b.disabled = true; b.textContent = b.dataset.busy; }
  });
}

function para(text, cls) {
  const p = document.createElement("p");
  p.textContent = text; if (cls) p.className = cls;
  return p;
}

function showCheck(out, res) {
  const h = document.createElement("h3");
  const v = document.createElement("span");
  v.className = res.passed ? "pass" : "fail";
  v.textContent = `${res.verdict} · ${res.score_text}`;
  h.append(v);
  const table = document.createElement("table");
  table.className = "criteria";
  const body = table.createTBody();
  for (const c of res.criteria || []) {
    const tr = body.insertRow();
    tr.dataset.criterion = c.name; tr.className = c.ok ? "ok" : "bad";
    const th = document.createElement("th"); th.textContent = c.title;
    tr.append(th);
    tr.insertCell().textContent = c.points;
    tr.insertCell().textContent = c.detail;
  }
  out.replaceChildren(h, table);
}

// hints open in place, so the half-filled answer stays as it is.
function hints(session) {
  document.querySelectorAll("form[data-hint]").forEach((f) => f.addEventListener("submit", async (e) => {
    e.preventDefault();
    const r = await fetch(f.action, { method: "POST", body: new FormData(f), headers: { Accept: "application/json" } });
    if (!r.ok) { f.submit(); return; }
    const h = await r.json();
    const div = document.createElement("div");
    div.className = "hint";
    const n = document.createElement("strong");
    n.textContent = `${h.n}. `;
    const text = document.createElement("span");
    text.innerHTML = h.html; // rendered by the server from the scenario's own text
    div.append(n, text);
    f.replaceWith(div);
  }));
}

// pollState follows the start-up: progress, and when scoring is confirmed. The page
// reloads only when it has no terminals yet or the lab stopped running.
function pollState(page, session, hasTerminals) {
  const poll = async () => {
    const r = await fetch(`/lab/${session}/state`, { headers: { Accept: "application/json" } });
    if (r.ok) {
      const s = await r.json();
      const bar = document.querySelector("#progress");
      if (bar && s.progress) { bar.value = s.progress.done; bar.max = s.progress.total; }
      const msg = document.querySelector("#progress-step");
      if (msg && s.step_text) msg.textContent = s.step_text;
      const ttl = document.querySelector("[data-expires]");
      if (ttl && s.expires) ttl.dataset.expires = s.expires; // it stands still while the lab is queued
      const queue = document.querySelector("#queue");
      if (queue) { queue.textContent = s.queue_text || ""; queue.hidden = !s.queue_text; }
      if (!s.running || (!hasTerminals && s.nodes && s.nodes.length)) { location.reload(); return; }
      const sc = document.querySelector("#scoring");
      if (sc && s.state === "ready" && !s.confirmed) sc.textContent = sc.dataset.pendingText; // the terminals are open now
      if (s.confirmed) {
        if (sc) { sc.textContent = sc.dataset.confirmedText; sc.className = "ok"; }
        bar?.remove(); msg?.remove(); document.querySelector("#queue")?.remove();
        page.dataset.confirmed = "true";
        return;
      }
    }
    setTimeout(poll, 500);
  };
  poll();
}
