// A workshop lab's live news: the instructor's messages and actions, newest first,
// the hints the instructor revealed, opened in place, and the lab's end as an
// extension moves it. The snapshots come from
// the learner's workshop websocket; every text comes from the server.
(() => {
  const box = document.getElementById("ws-live");
  if (!box) return;
  const { workshop, lab } = box.dataset;
  const news = document.getElementById("ws-news");
  const status = box.querySelector(".live-status");
  const shown = 3;
  let backoff = 500;

  const render = (d) => {
    const items = d.timeline.filter((t) => t.kind !== "joined").slice(-shown).reverse();
    if (items.length > 0) {
      news.replaceChildren(...items.map((t) => {
        const li = document.createElement("li");
        li.dataset.kind = t.kind;
        const at = document.createElement("time");
        at.textContent = t.at;
        li.append(at, " " + t.text);
        return li;
      }));
    }
    if (!d.lab || d.lab.id !== lab) return;
    const ttl = document.querySelector(".ttl[data-expires]");
    if (ttl) ttl.dataset.expires = d.lab.expires;
    for (const h of d.lab.hints) {
      const f = document.querySelector(`form[data-hint="${h.n}"]`);
      if (!f) continue;
      const div = document.createElement("div");
      div.className = "hint";
      const n = document.createElement("strong");
      n.textContent = `${h.n}. `;
      const text = document.createElement("span");
      text.innerHTML = h.html; // rendered by the server from the scenario's own text
      div.append(n, text);
      f.replaceWith(div);
    }
  };

  const connect = () => {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${location.host}/workshops/${workshop}/events/ws`);
    ws.onopen = () => { backoff = 500; status.textContent = ""; };
    ws.onmessage = (ev) => {
      const d = JSON.parse(ev.data);
      render(d);
      box.dataset.ended = String(d.ended);
    };
    ws.onclose = () => {
      if (box.dataset.ended === "true") return;
      status.textContent = box.dataset.offline;
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 8000);
    };
  };
  connect();
})();
