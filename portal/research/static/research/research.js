// Research pages: tick every episode on the page; a dataset being built polls its status, shows the phase and
// its progress, and reloads when its state changes.
(function () {
  "use strict";
  const tickAll = document.getElementById("tick-all");
  if (tickAll) {
    tickAll.addEventListener("change", function () {
      document.querySelectorAll("input[name=items]").forEach(function (box) { box.checked = tickAll.checked; });
    });
  }
  const watched = document.querySelector("[data-status-url]");
  if (!watched) { return; }
  const url = watched.getAttribute("data-status-url");
  const state = watched.getAttribute("data-state");
  const show = function (id, value) { const node = document.getElementById(id); if (node) { node.textContent = value; } };
  const poll = function () {
    fetch(url, { headers: { Accept: "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (data) {
        if (data.state !== state) { window.location.reload(); return; }
        // Queued until the worker has counted the work: no "0 of 0" with an empty bar.
        show("phase", data.total ? (data.phase || "working") : "Queued, waiting for a worker");
        const counts = document.getElementById("counts");
        if (counts) { counts.hidden = !data.total; }
        show("done", data.done);
        show("total", data.total);
        const bar = document.querySelector("#progress progress");
        if (bar) { bar.max = data.total || 1; bar.value = data.done; }
        setTimeout(poll, 1000);
      })
      .catch(function () { setTimeout(poll, 3000); });
  };
  setTimeout(poll, 1000);
})();
