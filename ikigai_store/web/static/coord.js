// The coordination pages' countdowns: an element with data-left="<seconds>" (seconds left
// when the server rendered it, by the database's clock) counts down from when this page first
// saw it, so the browser's clock never matters; regions replaced by a live refresh bring
// fresh values.
"use strict";
(function () {
  const seen = new WeakMap();
  function tick() {
    const now = performance.now();
    for (const el of document.querySelectorAll("[data-left]")) {
      if (!seen.has(el)) { seen.set(el, now + Number(el.dataset.left) * 1000); }
      const left = Math.round((seen.get(el) - now) / 1000);
      const text = left > 0 ? `${left}s left` : "expired";
      if (el.textContent !== text) { el.textContent = text; }
      el.classList.toggle("expired", left <= 0);
      el.classList.toggle("soon", left > 0 && left <= 10);
    }
  }
  document.addEventListener("DOMContentLoaded", tick);
  setInterval(tick, 1000);
})();
