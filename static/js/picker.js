// Model pickers: a <select class="model-select"> gets a button and, from the <template> its
// data-list names, a searchable listbox: type to filter, ↑/↓, Enter picks, Escape closes.
// The select stays, visually hidden, as the form's value; a pick fires its "change". The
// popup is a popover: in the top layer no scrolling box clips it.
const {on, all} = Numi;
let count = 0, picked = null;  // the select last picked in: its swapped-in copy keeps focus

// A select that holds only its chosen option (Regenerate's, one per answer) gets the
// others from the page's one options template when its menu first opens.
function fillOptions(select) {
  const src = document.getElementById(select.dataset.options || "");
  if (!src) return;
  delete select.dataset.options;
  const chosen = select.selectedOptions[0], options = src.content.cloneNode(true);
  const same = chosen && [...options.querySelectorAll("option")].find((o) => o.value === chosen.value);
  if (same) same.replaceWith(chosen);
  else if (chosen) options.prepend(chosen);
  select.replaceChildren(options);
  if (chosen) chosen.selected = true;
}

function enhance(select) {
  if (select.closest("details:not([open])")) return;  // Regenerate's: built when opened
  fillOptions(select);
  const tpl = document.getElementById(select.dataset.list);
  if (select.dataset.picker || !tpl || !HTMLElement.prototype.showPopover) return;
  const id = select.dataset.picker = "picker" + ++count;
  select.after(tpl.content.cloneNode(true));
  const button = select.nextElementSibling, pop = button.nextElementSibling, [input, list, none] = pop.children;
  button.setAttribute("popovertarget", pop.id = id);
  input.setAttribute("aria-controls", list.id = id + "l");
  const opts = [...list.querySelectorAll("[role=option]")];
  opts.forEach((o, i) => o.id = id + "-" + i);
  select.classList.add("visually-hidden");
  select.tabIndex = -1;
  select.setAttribute("aria-hidden", "true");
  const found = () => opts.filter((o) => !o.hidden && !o.hasAttribute("aria-disabled"));
  const active = () => list.querySelector(".active");

  function show() {
    const o = select.selectedOptions[0], name = o ? o.dataset.model || o.text : "Model";
    button.textContent = name;
    button.setAttribute("aria-label", "Model: " + name);
    if (!select.value) {  // none chosen (a chat made by the API): "Model" where it is narrow
      const long = document.createElement("span"), short = document.createElement("span");
      long.className = "picker-none-long";
      long.textContent = name;
      short.className = "picker-none-short";
      short.textContent = "Model";
      button.replaceChildren(long, short);
      button.setAttribute("aria-label", "Model: none chosen");
    }
    for (const item of opts) item.setAttribute("aria-selected", item.dataset.value === select.value);
  }
  function activate(item) {
    active()?.classList.remove("active");
    input.setAttribute("aria-activedescendant", item?.id || "");
    item?.classList.add("active");
    item?.scrollIntoView({block: "nearest"});
  }
  function filter() {
    const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const group of list.children) {
      let shown = 0;
      for (const item of group.querySelectorAll("[role=option]")) {
        const text = group.dataset.label + " " + item.textContent.toLowerCase();
        shown += !(item.hidden = !words.every((w) => text.includes(w)));
      }
      group.hidden = !shown;
    }
    const items = found();
    none.hidden = items.length > 0;
    activate(items.find((i) => i.dataset.value === select.value) || items[0]);
  }
  function pick(item) {
    if (!item || item.hasAttribute("aria-disabled")) return;
    pop.hidePopover();
    button.focus();  // after a click too (the popover gives focus back only from inside it)
    if (select.value === item.dataset.value) return;
    picked = select.id;
    select.value = item.dataset.value;
    select.dispatchEvent(new Event("change", {bubbles: true}));
  }
  pop.addEventListener("toggle", (event) => {
    if (event.newState !== "open") return void (input.value = "");
    // Below the button, or above it when there is more room there (the composer's).
    const r = button.getBoundingClientRect(), below = innerHeight - r.bottom, up = below < 260 && r.top > below;
    pop.style.left = Math.max(8, Math.min(r.left, innerWidth - pop.offsetWidth - 8)) + "px";
    pop.style.top = up ? "auto" : r.bottom + 4 + "px";
    pop.style.bottom = up ? innerHeight - r.top + 4 + "px" : "auto";
    list.style.maxHeight = Math.max(120, Math.min(360, (up ? r.top : below) - 70)) + "px";
    filter();
    input.focus();
  });
  input.addEventListener("input", filter);
  // The search's own "change" (on blur) is not the form's: the header saves on change.
  input.addEventListener("change", (event) => event.stopPropagation());
  input.addEventListener("keydown", (event) => {
    const items = found(), n = items.length, down = event.key === "ArrowDown";
    if (down || event.key === "ArrowUp") {
      if (n) activate(items[(items.indexOf(active()) + (down ? 1 : n - 1)) % n]);
    } else if (event.key === "Enter") pick(active());  // never submits the picker's form
    else if (event.key === "Escape") {
      pop.hidePopover();
      event.stopPropagation();  // closes the list, never also stops the answer
    } else return;
    event.preventDefault();
  });
  list.addEventListener("click", (event) => {
    event.preventDefault();  // inside a <label> (a project's defaults): no label activation
    pick(event.target.closest("[role=option]"));
  });
  pop.addEventListener("focusout", (event) => {
    const to = event.relatedTarget;
    if (to && to !== button && !pop.contains(to)) pop.hidePopover();  // Tab leaves: close
  });
  select.addEventListener("change", show);
  show();
  if (picked && picked === select.id && document.activeElement === document.body) button.focus();
}

all(".model-select").forEach(enhance);
on("htmx:load", (event) => event.detail.elt.querySelectorAll?.(".model-select").forEach(enhance));
on("toggle", (event) => event.target.open && event.target.querySelectorAll(".model-select").forEach(enhance), true);
