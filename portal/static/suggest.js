// Suggestions for a typed filter: an <input list="…" data-suggest="URL"> gets its <datalist> filled from
// the portal's suggestion endpoint (JSON {"results": [...]}) as the user types. Without scripts the input is
// a plain text field and the filter still works on the exact value typed.
"use strict";

for (const input of document.querySelectorAll("input[data-suggest]")) {
  const list = document.getElementById(input.getAttribute("list"));
  if (!list) continue;
  let timer = null;
  let asked = null;
  const ask = async () => {
    const term = input.value.trim();
    if (term === asked) return;
    asked = term;
    const url = new URL(input.dataset.suggest, window.location.href);
    url.searchParams.set("q", term);
    let response;
    try {
      response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    } catch {
      return;  // offline or the server is away: the field stays a plain text field
    }
    if (!response.ok || input.value.trim() !== term) return;
    const { results } = await response.json();
    list.replaceChildren(...results.map((value) => {
      const option = document.createElement("option");
      option.value = value;
      return option;
    }));
  };
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(ask, 150);
  });
  input.addEventListener("focus", ask, { once: true });
}
