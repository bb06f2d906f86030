// Drop a chat of the list on a sidebar project: PATCH /api/session/<id> {project_id}, reload.
// The route is the sidebar's data-session-url.
const {$} = window.Numi;
const T = "application/x-numi-chat";
const at = (e) => e.target.closest?.(".project-item[data-project-id]");
const on = (type, fn) => document.addEventListener(type, fn);
on("dragstart", (e) => {
  const id = e.target.closest?.(".chat-item[data-chat-id]")?.dataset.chatId;
  if (id) e.dataTransfer.setData(T, id);
});
on("dragover", (e) => {
  const p = at(e);
  if (p && e.dataTransfer.types.includes(T)) { e.preventDefault(); p.classList.add("drop-target"); }
});
on("dragleave", (e) => at(e)?.classList.remove("drop-target"));
on("drop", async (e) => {
  const p = at(e), id = e.dataTransfer.getData(T);
  if (!p || !id) return;
  e.preventDefault();
  const route = $("sidebar")?.dataset.sessionUrl;
  if (!route) return;
  const r = await fetch(Numi.urlFor(route, id), {
    method: "PATCH", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ project_id: +p.dataset.projectId }),
  });
  if (r.ok) location.reload(); else p.classList.remove("drop-target");
});
