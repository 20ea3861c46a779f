// Confirmation before an action that cannot be undone: a <form data-confirm="question"> asks the question when it
// is submitted and is sent only if the user says yes. A static script, so it works under the portal's
// Content-Security-Policy (no inline script). Without scripts the form still needs what it always needs (a
// reason, the manifest's SHA-256, a date): nothing is sent by a single stray click on an empty form.
"use strict";

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
  if (!window.confirm(form.dataset.confirm)) {
    event.preventDefault();
    event.stopImmediatePropagation();
  }
}, true);
