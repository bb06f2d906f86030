// Saved prompts: "/" in the composer (_prompt_list.html).
(() => {
  const $ = id => document.getElementById(id), box = $("composer-input"), list = $("prompt-list");
  const items = [...list.children], typed = () => /^\/([\w-]*)(\s[\s\S]*)?$/.exec(box.value);
  let shown = [], active;
  function mark(li) {
    active = li;
    items.forEach(o => o.setAttribute("aria-selected", o === li));
    box.setAttribute("aria-activedescendant", li?.id || "");
    li?.scrollIntoView({block: "nearest"});
  }

  function update(m) {
    shown = items.filter(li => !(li.hidden = !m || !li.dataset.command.startsWith(m[1])));
    box.setAttribute("aria-expanded", !(list.hidden = !shown.length));
    mark(shown[0]);
  }

  async function pick(li) {
    const input = (typed()?.[2] || "").trim();
    let text = li.dataset.text, clip = "";
    update(null);
    if (text.includes("{{clipboard}}")) try { clip = await navigator.clipboard.readText(); } catch {}
    text = text.replace(/{{clipboard}}/g, () => clip);
    const at = input ? -1 : text.indexOf("{{input}}");
    box.value = text = text.replace(/{{input}}/g, () => input);
    box.focus();
    if (at >= 0) box.setSelectionRange(at, at);
    box.dispatchEvent(new Event("input", {bubbles: true}));  // composer.js grows, saves
  }

  box.addEventListener("input", e => e.isTrusted && update(typed()));
  // Before composer.js (on document) sends on Enter.
  box.addEventListener("keydown", e => {
    const k = e.key, step = {ArrowDown: 1, ArrowUp: shown.length - 1}[k];
    if (list.hidden || e.isComposing) return;
    if (step) mark(shown[(shown.indexOf(active) + step) % shown.length]);
    else if (k === "Tab" || k === "Enter" && !e.shiftKey) pick(active);
    else if (k === "Escape") update(null);
    else return;
    e.preventDefault();
    e.stopPropagation();
  });
  // mousedown, prevented: the box keeps the focus.
  list.addEventListener("mousedown", e => { e.preventDefault(); pick(e.target.closest("li") || active); });
})();
