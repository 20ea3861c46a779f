// A Copy button beside each copy-ready command (<pre class="command" data-copy>): the release and dataset pages'
// ceres-pull commands and the client's page. A static script, so it works under the portal's
// Content-Security-Policy (no inline script). Where the browser gives no clipboard (a page served over plain HTTP
// from another host), the button selects the command instead, for Ctrl-C. Without scripts the commands are plain
// text to select. The button keeps what it last did in data-done ("copied" or "selected").
"use strict";

function selectText(element) {
  const range = document.createRange();
  range.selectNodeContents(element);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

document.querySelectorAll("pre.command[data-copy]").forEach((command) => {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "small copy";
  button.textContent = "Copy";
  button.addEventListener("click", () => {
    const text = command.textContent.trim();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        () => { button.textContent = "Copied"; button.dataset.done = "copied"; },
        () => { selectText(command); button.textContent = "Selected: Ctrl-C"; button.dataset.done = "selected"; });
    } else {
      selectText(command);
      button.textContent = "Selected: Ctrl-C";
      button.dataset.done = "selected";
    }
    window.setTimeout(() => { button.textContent = "Copy"; }, 2000);
  });
  command.after(button);
});
