// The one-time sign-in link's page (templates/sign_in.html): take the code out of the
// address bar and this history entry, then post it. The browser's history database has
// already recorded the link; the server spends its code on this post, so what is
// recorded opens nothing. Without JavaScript the page's button posts the same form.
const form = document.getElementById("sign-in-form");
if (form) {
  history.replaceState(null, "", form.getAttribute("action"));
  form.submit();
}
