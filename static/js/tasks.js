// The Tasks page (templates/tasks.html): a task's time zone defaults to the browser's, so
// "every weekday at 8:00" means 8:00 where the user is. Filled in empty fields only, again
// after each swap of the page's body.
const fill = () => {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (!zone) return;
  document.querySelectorAll("input.task-timezone").forEach((input) => { if (!input.value) input.value = zone; });
};
document.addEventListener("DOMContentLoaded", fill);
document.addEventListener("htmx:afterSettle", fill);
