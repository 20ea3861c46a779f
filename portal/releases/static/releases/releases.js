// Release pages: tick every episode on the page; a request being inspected or released polls its status and
// reloads when its state (or the gate's pending state) changes, showing the objects copied meanwhile and what the
// job is doing before its copies start (the episode being redacted).
(function () {
  "use strict";
  const tickAll = document.getElementById("tick-all");
  if (tickAll) {
    tickAll.addEventListener("change", function () {
      document.querySelectorAll("input[name=episodes]").forEach(function (box) { box.checked = tickAll.checked; });
    });
  }
  const watched = document.querySelector("[data-status-url]");
  if (watched) {
    const url = watched.getAttribute("data-status-url");
    const state = watched.getAttribute("data-state");
    const pending = watched.getAttribute("data-pending") === "1";
    const poll = function () {
      fetch(url, { headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (data) {
          if (data.state !== state || data.gate_pending !== pending) { window.location.reload(); return; }
          const copied = document.getElementById("objects-copied");
          const bar = document.getElementById("release-progress");
          if (copied) { copied.textContent = data.objects_copied; }
          if (bar) { bar.value = data.objects_copied; }
          const note = document.getElementById("progress-note");
          if (note) {
            const text = data.progress_note || "";
            note.textContent = text.charAt(0).toUpperCase() + text.slice(1);
            note.hidden = !text;
          }
          setTimeout(poll, 1000);
        })
        .catch(function () { setTimeout(poll, 3000); });
    };
    setTimeout(poll, 1000);
  }
})();
