// Live refresh of a page marked data-refresh="SECONDS": fetch the page again
// and swap its <main> in place, so scroll position and the tab stay put.
// One fetch at a time (the next is timed from the end of the last), none
// while the tab is hidden, and no swap while a form field has focus.
"use strict";
(function () {
  const main = document.getElementById("page");
  const seconds = main && Number(main.dataset.refresh);
  if (!(seconds > 0)) return;
  const editing = () => document.activeElement && document.activeElement.closest("form");
  async function refresh() {
    if (document.hidden || editing()) return;
    try {
      const response = await fetch(location.href, { headers: { Accept: "text/html" } });
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      const next = fresh.getElementById("page");
      if (next && !editing()) {
        main.innerHTML = next.innerHTML;
        main.dataset.refreshedAt = String(Date.now());
      }
    } catch (error) {
      // The server is restarting or gone: keep what is shown, try again later.
    }
  }
  async function loop() {
    await refresh();
    setTimeout(loop, seconds * 1000);
  }
  setTimeout(loop, seconds * 1000);
})();
