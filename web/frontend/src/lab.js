// The lab page: one xterm.js terminal per lab node over a websocket, a live chart of the
// workload's bus bandwidth, the answer form's evidence picker, and the TTL countdown.
// The server renders the page; this script only makes it live (it works without any
// framework and degrades to plain forms where it can).
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import uPlot from "uplot";
import "@xterm/xterm/css/xterm.css";
import "uplot/dist/uPlot.min.css";

const page = document.querySelector("[data-lab-session]");
if (page) start(page);

function start(page) {
  const session = page.dataset.labSession;
  const csrf = page.dataset.csrf;
  document.querySelectorAll("[data-terminal]").forEach((el) => terminal(el, session));
  const chartEl = document.querySelector("#busbw-chart");
  if (chartEl) chart(chartEl, session);
  countdown(document.querySelector("[data-expires]"));
  evidencePicker(document.querySelector("#evidence-picker"), session);
  document.querySelectorAll("form[data-confirm]").forEach((f) =>
    f.addEventListener("submit", (e) => { if (!confirm(f.dataset.confirm)) e.preventDefault(); }));
  if (page.dataset.state === "starting") pollState(page, session);
  // Grading measures the workload again and can take a while: say so.
  document.querySelector("#answer")?.addEventListener("submit", (e) => {
    if (e.defaultPrevented) return;
    const b = e.target.querySelector("button[type=submit]");
    if (b) { b.disabled = true; b.textContent = b.dataset.busy || "…"; }
  });
}

function wsURL(path) {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${location.host}${path}`;
}

// terminal connects an xterm.js terminal to a node's shell and reconnects after a blip;
// the server replays the scrollback on every connect, so the screen is rebuilt.
function terminal(el, session) {
  const node = el.dataset.terminal;
  const status = el.parentElement.querySelector(".term-status");
  const term = new Terminal({
    cursorBlink: true, fontSize: 14, scrollback: 5000, convertEol: false,
    screenReaderMode: localStorage.getItem("commlab.sr") === "1",
    fontFamily: '"JetBrains Mono", Menlo, Consolas, "Liberation Mono", monospace',
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(el);
  fit.fit();
  el.commlabTerm = term; // for tests and the screen-reader switch
  let ws = null, backoff = 500, closedByServer = false;
  const setStatus = (s, cls) => { if (status) { status.textContent = s; status.className = "term-status " + (cls || ""); } };
  const send = (obj) => { if (ws && ws.readyState === 1) ws.send(JSON.stringify(obj)); };
  const connect = () => {
    setStatus(el.dataset.connecting || "connecting…", "wait");
    ws = new WebSocket(wsURL(`/lab/${session}/term/${encodeURIComponent(node)}/ws`));
    ws.binaryType = "arraybuffer";
    el.commlabWS = ws; // tests drop it to check reconnects
    ws.onopen = () => {
      backoff = 500;
      term.reset();
      setStatus(el.dataset.connected || "connected", "ok");
      send({ type: "resize", cols: term.cols, rows: term.rows });
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data === "string") {
        const msg = JSON.parse(ev.data);
        if (msg.type === "idle-warning") setStatus(msg.text, "warn");
        if (msg.type === "closed") { closedByServer = true; setStatus(msg.text, "bad"); }
        return;
      }
      term.write(new Uint8Array(ev.data));
    };
    ws.onclose = () => {
      if (closedByServer) return;
      setStatus(el.dataset.reconnecting || "reconnecting…", "warn");
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 8000);
    };
  };
  const enc = new TextEncoder();
  term.onData((d) => { if (ws && ws.readyState === 1) ws.send(enc.encode(d)); });
  term.onResize(({ cols, rows }) => send({ type: "resize", cols, rows }));
  new ResizeObserver(() => fit.fit()).observe(el);
  connect();
}

// chart draws busbw over time from the metrics websocket; fault events become markers.
function chart(el, session) {
  const xs = [], ys = [], events = [];
  const opts = {
    width: el.clientWidth || 600, height: 220,
    series: [{}, { label: el.dataset.label || "busbw (GB/s)", stroke: "#0b5cad", width: 2, points: { show: false } }],
    // Lab links run at Mbit/s, so busbw is a few hundredths of a GB/s: keep 3 significant digits.
    axes: [{}, { label: "GB/s", size: 70, values: (u, vals) => vals.map((v) => (v === 0 ? "0" : Number(v.toPrecision(3)).toString())) }],
    scales: { x: { time: true } },
    hooks: { draw: [(u) => drawEvents(u, events)] },
  };
  const plot = new uPlot(opts, [xs, ys], el);
  new ResizeObserver(() => plot.setSize({ width: el.clientWidth, height: 220 })).observe(el);
  const connect = () => {
    const ws = new WebSocket(wsURL(`/lab/${session}/metrics/ws`));
    ws.onmessage = (ev) => {
      const m = JSON.parse(ev.data);
      if (m.type === "sample") { xs.push(m.t); ys.push(m.busbw); if (xs.length > 600) { xs.shift(); ys.shift(); } }
      if (m.type === "event") events.push(m);
      plot.setData([xs, ys]);
      el.dataset.samples = String(xs.length);
    };
    ws.onclose = () => setTimeout(connect, 2000);
  };
  connect();
}

function drawEvents(u, events) {
  const ctx = u.ctx;
  ctx.save();
  for (const e of events) {
    const x = u.valToPos(e.t, "x", true);
    if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
    ctx.strokeStyle = "#c62828";
    ctx.setLineDash([4, 4]);
    ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
    ctx.fillStyle = "#c62828";
    ctx.fillText(e.label, x + 4, u.bbox.top + 12);
  }
  ctx.restore();
}

// countdown shows the time left before the lab expires and warns in the last 5 minutes.
function countdown(el) {
  if (!el) return;
  const end = Date.parse(el.dataset.expires);
  const tick = () => {
    const s = Math.max(0, Math.round((end - Date.now()) / 1000));
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
  document.querySelector("#refresh-evidence")?.addEventListener("click", refresh);
  refresh();
}

// pollState reloads the page once a starting lab is ready (or has failed).
function pollState(page, session) {
  const poll = async () => {
    const r = await fetch(`/lab/${session}/state`, { headers: { Accept: "application/json" } });
    if (r.ok) {
      const s = await r.json();
      const bar = document.querySelector("#progress");
      if (bar && s.progress) { bar.value = s.progress.done; bar.max = s.progress.total; }
      const msg = document.querySelector("#progress-step");
      if (msg && s.step) msg.textContent = s.step;
      if (s.state !== "starting") { location.reload(); return; }
    }
    setTimeout(poll, 500);
  };
  poll();
}
