// Live refresh of a page marked data-refresh="SECONDS": fetch the page again
// and swap its <main> in place, so scroll position and the tab stay put.
// Paused while the tab is hidden or a form field has focus.
"use strict";
(function () {
  const main = document.getElementById("page");
  const seconds = main && Number(main.dataset.refresh);
  if (!seconds) return;
  async function refresh() {
    const busy = document.activeElement && document.activeElement.closest("form");
    if (document.hidden || busy) return;
    try {
      const response = await fetch(location.href, { headers: { Accept: "text/html" } });
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      const next = fresh.getElementById("page");
      if (next) {
        main.innerHTML = next.innerHTML;
        main.dataset.refreshedAt = String(Date.now());
      }
    } catch (error) {
      // The server is restarting or gone: keep what is shown, try again later.
    }
  }
  setInterval(refresh, seconds * 1000);
})();
