// Projects in the sidebar: drag a chat from the list onto a project to move it there
// (PATCH /api/session/<id> {project_id}); the page then reloads so every view of the chat
// (the list, the project's count, the chat's Project menu) says where it is now. Without
// JavaScript, the chat's Project menu does the same with a form.
const TYPE = "application/x-numi-chat";

function projectAt(event) {
  return event.target.closest?.(".project-item[data-project-id]") || null;
}

function toast(message) {
  const box = document.getElementById("toasts");
  if (!box) return;
  const note = document.createElement("div");
  note.className = "toast toast-error";
  note.setAttribute("role", "alert");
  note.textContent = message; // text, never markup: the message comes from the server
  box.append(note);
  setTimeout(() => note.remove(), 6000);
}

document.addEventListener("dragstart", (event) => {
  const item = event.target.closest?.(".chat-item[data-chat-id]");
  if (!item || !event.dataTransfer) return;
  event.dataTransfer.setData(TYPE, item.dataset.chatId);
  event.dataTransfer.effectAllowed = "move";
  document.body.classList.add("dragging-chat");
});

document.addEventListener("dragend", () => {
  document.body.classList.remove("dragging-chat");
  document.querySelectorAll(".project-item.drop-target").forEach((el) => el.classList.remove("drop-target"));
});

document.addEventListener("dragover", (event) => {
  const project = projectAt(event);
  if (!project || !event.dataTransfer?.types.includes(TYPE)) return;
  event.preventDefault();
  event.dataTransfer.dropEffect = "move";
  project.classList.add("drop-target");
});

document.addEventListener("dragleave", (event) => {
  const project = projectAt(event);
  if (project && !project.contains(event.relatedTarget)) project.classList.remove("drop-target");
});

document.addEventListener("drop", async (event) => {
  const project = projectAt(event);
  const chatId = event.dataTransfer?.getData(TYPE);
  if (!project || !chatId) return;
  event.preventDefault();
  project.classList.remove("drop-target");
  const response = await fetch(`/api/session/${encodeURIComponent(chatId)}`, {
    method: "PATCH",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    credentials: "same-origin",
    body: JSON.stringify({ project_id: Number(project.dataset.projectId) }),
  });
  if (response.ok) {
    window.location.reload();
    return;
  }
  const body = await response.json().catch(() => null);
  toast(body?.error?.message || "The chat could not be moved.");
});
