// The exam countdown: the deadline and the time are the server's, so a wrong
// clock in the browser changes nothing; at zero the page reloads and the
// server submits the attempt (a lab page of the exam goes to the attempt's).
(() => {
  const el = document.querySelector("[data-deadline]");
  const out = document.getElementById("exam-left");
  if (!el || !out) return;
  const skew = Date.parse(el.dataset.now) - Date.now();
  const deadline = Date.parse(el.dataset.deadline);
  const tick = () => {
    const left = Math.max(0, deadline - (Date.now() + skew));
    const s = Math.floor(left / 1000);
    out.textContent = `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
    if (left === 0) {
      clearInterval(timer);
      setTimeout(() => (el.dataset.then ? location.assign(el.dataset.then) : location.reload()), 1000);
    }
  };
  const timer = setInterval(tick, 1000);
  tick();
})();
