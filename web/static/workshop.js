// A workshop's live page. The instructor's dashboard (learners × labs) and the
// learner's timeline are rebuilt from the snapshots the server pushes over a
// websocket; every text comes from the server (snapshot or data-* attributes).
// The instructor's action forms post in the background, so the page never reloads;
// without this script they are plain forms.
(() => {
  const root = document.querySelector("[data-workshop]");
  if (!root) return;
  const id = root.dataset.workshop;
  const instructor = root.dataset.role === "instructor";
  const status = root.querySelector(".live-status");
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  };

  const timeline = (entries) => {
    const ol = document.getElementById("timeline");
    ol.replaceChildren(...entries.map((t) => {
      const li = el("li");
      li.dataset.kind = t.kind;
      li.append(el("time", null, t.at), " " + t.text + (t.whom ? " · " + t.whom : ""));
      if (t.secret) li.append(" ", el("code", null, t.secret));
      return li;
    }));
  };

  // resetForm ends one learner's running lab; it posts like the other actions.
  const resetForm = (learner) => {
    const f = el("form", "inline");
    f.method = "post";
    f.action = `/workshops/${id}/reset`;
    f.dataset.action = "";
    const csrf = el("input");
    csrf.type = "hidden";
    csrf.name = "csrf_token";
    csrf.value = document.querySelector("input[name=csrf_token]").value;
    const who = el("input");
    who.type = "hidden";
    who.name = "learner";
    who.value = String(learner);
    const b = el("button", "secondary small", grid.dataset.reset);
    b.type = "submit";
    b.dataset.confirm = grid.dataset.resetConfirm;
    b.dataset.reset = String(learner);
    f.append(csrf, who, b);
    f.addEventListener("submit", post);
    return f;
  };

  const grid = document.getElementById("dashboard");
  const dashboard = (d) => {
    const ds = grid.dataset;
    const head = el("tr");
    head.append(el("th", null, ds.learner), ...d.labs.map((l, i) => {
      const th = el("th", l.open ? "open" : "closed", `${i + 1}. ${l.title}`);
      th.scope = "col";
      return th;
    }), el("th", null, ds.idle), el("th", null, ds.commands));
    grid.tHead.replaceChildren(head);
    const rows = d.learners.map((l) => {
      const tr = el("tr", l.stuck ? "stuck" : "");
      tr.dataset.learner = l.id;
      const name = el("th");
      name.scope = "row";
      const a = el("a", null, l.name);
      a.href = `/workshops/${id}/learners/${l.id}`;
      a.title = ds.watchText;
      name.append(a);
      if (l.stuck) name.append(" ", el("span", "badge bad", ds.stuck));
      tr.append(name, ...l.cells.map((c) => {
        const td = el("td", "cell " + c.state, c.text);
        td.dataset.state = c.state;
        if (c.score) td.append(" " + c.score);
        if (c.hints) td.append(` · ${ds.hints} ${c.hints}`);
        return td;
      }), el("td", "idle", l.idle_text || "–"));
      const cmds = el("td", "cmds");
      l.commands.forEach((c) => cmds.append(el("code", null, c)));
      tr.append(cmds);
      if (l.running >= 0) name.append(" ", resetForm(l.id));
      return tr;
    });
    if (rows.length === 0) {
      const tr = el("tr");
      const td = el("td", "muted", ds.empty);
      td.colSpan = d.labs.length + 3;
      tr.append(td);
      rows.push(tr);
    }
    grid.tBodies[0].replaceChildren(...rows);
    // The inject and extend forms offer every learner, keeping the one picked.
    document.querySelectorAll("select[data-learners]").forEach((who) => {
      const picked = who.value;
      who.replaceChildren(who.options[0], ...d.learners.map((l) => {
        const o = el("option", null, l.name);
        o.value = String(l.id);
        return o;
      }));
      who.value = [...who.options].some((o) => o.value === picked) ? picked : "0";
    });
  };

  const learner = (d) => {
    document.querySelectorAll("[data-lab-n]").forEach((li) => {
      const open = Number(li.dataset.labN) <= d.opened;
      li.querySelector("form").hidden = !open;
      li.querySelector(".lab-closed").hidden = open;
      li.querySelector("button").disabled = d.ended;
    });
  };

  let backoff = 500;
  const connect = () => {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${location.host}/workshops/${id}/${instructor ? "live" : "events"}/ws`);
    ws.onopen = () => { backoff = 500; status.textContent = ""; };
    ws.onmessage = (ev) => {
      const d = JSON.parse(ev.data);
      root.dataset.ended = String(d.ended);
      if (d.ended) status.textContent = root.dataset.endedText;
      timeline(d.timeline);
      if (instructor) dashboard(d); else learner(d);
    };
    ws.onclose = () => {
      if (root.dataset.ended === "true") return;
      status.textContent = root.dataset.offline;
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 8000);
    };
  };
  connect();

  async function post(e) {
    e.preventDefault();
    const f = e.currentTarget;
    const b = f.querySelector("button[data-confirm]");
    if (b && !confirm(b.dataset.confirm)) return;
    const r = await fetch(f.action, { method: "POST", body: new URLSearchParams(new FormData(f)), headers: { Accept: "application/json" } });
    const out = await r.json().catch(() => ({}));
    status.textContent = r.ok ? "" : out.error || String(r.status);
    if (r.ok && f.querySelector("input[name=text]")) f.reset();
  }
  document.querySelectorAll("form[data-action]").forEach((f) => f.addEventListener("submit", post));
})();
