// Upload a capture source with a progress bar, then open its page; the detail page polls its state.
(function () {
  "use strict";
  const form = document.getElementById("upload-form");
  if (form) {
    const bar = document.getElementById("upload-progress");
    const status = document.getElementById("upload-status");
    const button = form.querySelector("button[type=submit]");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (button.disabled) return;  // one upload at a time: the button stays disabled while it runs
      button.disabled = true;
      const xhr = new XMLHttpRequest();
      xhr.open("POST", form.action);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.upload.addEventListener("progress", function (e) {
        if (e.lengthComputable) {
          bar.hidden = false;
          bar.value = Math.round((100 * e.loaded) / e.total);
          status.textContent = "Uploading… " + bar.value + "%";
        }
      });
      xhr.addEventListener("load", function () {
        if (xhr.status === 201) {
          status.textContent = "Uploaded; checking the source…";
          window.location.assign(JSON.parse(xhr.responseText).url);
        } else {
          status.textContent = "Upload refused (" + xhr.status + "): " + xhr.responseText.slice(0, 300);
          button.disabled = false;
        }
      });
      xhr.addEventListener("error", function () { status.textContent = "Upload failed: the connection broke."; button.disabled = false; });
      xhr.send(new FormData(form));
    });
  }
  const watched = document.querySelector("[data-status-url]");
  if (watched) {
    const url = watched.getAttribute("data-status-url");
    const initial = watched.getAttribute("data-state");
    const poll = function () {
      fetch(url, { headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (data) {
          const label = document.getElementById("progress-label");
          if (label) { label.textContent = data.label + " " + data.progress + "% " + data.note; }
          if (data.state !== initial) { window.location.reload(); } else { setTimeout(poll, 1000); }
        })
        .catch(function () { setTimeout(poll, 3000); });
    };
    setTimeout(poll, 1000);
  }
})();
