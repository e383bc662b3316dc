// The web view's live regions. An element with data-live="mail:3 task:* session:7" is
// refreshed when a change of one of those channels (and ids; * any) arrives: from data-src (a
// fragment URL, replacing its content) or, for a timeline, by appending what data-tail returns
// after data-after. Changes come from one /live event stream shared by every tab (a
// SharedWorker), or a stream of this page's own, closed on pagehide, where SharedWorker is
// missing. A "reset" (a reconnection that may have missed changes) refreshes every region.
"use strict";
(function () {
  const regions = () => Array.from(document.querySelectorAll("[data-live]"));
  const busy = new WeakMap();

  function wants(region, change) {
    for (const key of region.dataset.live.split(/\s+/)) {
      const [channel, id] = key.split(":");
      if (channel !== change.c) { continue; }
      if (id === "*" || change.ids === null || change.ids.includes(Number(id))) { return true; }
    }
    return false;
  }

  async function load(region, full) {
    const tail = region.dataset.tail;
    if (tail && !full) {
      const response = await fetch(`${tail}?after=${encodeURIComponent(region.dataset.after || "0")}`,
        { credentials: "same-origin", cache: "no-store" });
      if (response.headers.get("X-Reload")) { return load(region, true); }
      // An append held the session open past the server's wait: ask again a little later
      // (its commit also notifies, but a rollback would not).
      if (response.headers.get("X-Retry")) { setTimeout(() => refresh(region, false), 1000); return; }
      if (!response.ok) { return; }
      const html = await response.text();
      if (html.trim()) {
        region.insertAdjacentHTML("beforeend", html);
        const rows = region.querySelectorAll("[data-id]");
        region.dataset.after = rows[rows.length - 1].dataset.id;
        region.querySelector(".empty-row")?.remove();
      }
    } else {
      const response = await fetch(region.dataset.src, { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) { return; }
      region.innerHTML = await response.text();
      const rows = region.querySelectorAll("[data-id]");
      if (tail && rows.length) { region.dataset.after = rows[rows.length - 1].dataset.id; }
    }
    region.dispatchEvent(new CustomEvent("ikigai:updated", { bubbles: true }));
  }

  // At most one load per region at a time; changes that arrive meanwhile cause one more.
  async function refresh(region, full) {
    const state = busy.get(region);
    if (state) { state.again = true; state.full = state.full || full; return; }
    const mine = { again: false, full: false };
    busy.set(region, mine);
    try {
      await load(region, full);
      while (mine.again) {
        const again = mine.full;
        mine.again = false; mine.full = false;
        await load(region, again);
      }
    } catch (error) {
      console.warn("live refresh failed", error);
    } finally {
      busy.delete(region);
    }
  }

  function status(state) {
    const badge = document.getElementById("live-status");
    if (badge) { badge.textContent = state; badge.dataset.state = state; }
  }

  function heard(message) {
    if (message.type === "status") { status(message.state); return; }
    for (const region of regions()) {
      if (message.type === "reset") { refresh(region, true); }
      else if (message.type === "change" && wants(region, message.data)) { refresh(region, false); }
    }
  }

  function shared() {
    const worker = new SharedWorker("/static/live-worker.js", { name: "ikigai-live" });
    worker.port.onmessage = (e) => heard(e.data);
    worker.port.start();
    return () => worker.port.postMessage({ bye: true });
  }

  function own() {
    const source = new EventSource("/live");
    source.addEventListener("open", () => status("live"));
    source.addEventListener("error", () => status(source.readyState === EventSource.CLOSED ? "offline" : "reconnecting"));
    source.addEventListener("change", (e) => heard({ type: "change", data: JSON.parse(e.data) }));
    source.addEventListener("reset", () => heard({ type: "reset" }));
    return () => source.close();
  }

  let close = null;
  function connect() {
    if (close || !regions().length) { return; }
    try { close = window.SharedWorker ? shared() : own(); } catch (error) { close = own(); }
  }
  window.addEventListener("pagehide", () => { if (close) { close(); close = null; status("offline"); } });
  window.addEventListener("pageshow", (e) => {
    if (e.persisted) { connect(); heard({ type: "reset" }); }
  });

  // A rewind draws an arrow, in the timeline's left gutter, back up to the mark it returned
  // to (when both are on the page); redrawn when the list changes or the window resizes.
  const SVG = "http://www.w3.org/2000/svg";
  function drawRewinds(list) {
    list.querySelectorAll(":scope > svg.rewinds").forEach((old) => old.remove());
    const rewinds = Array.from(list.querySelectorAll("li.kind-rewind[data-target]"));
    const arrows = rewinds
      .map((r) => [r, document.getElementById(`e${r.dataset.target}`)])
      .filter(([, mark]) => mark && mark.parentElement === list);
    if (!arrows.length) { return; }
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "rewinds");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("width", "30");
    svg.setAttribute("height", String(list.scrollHeight));
    const defs = document.createElementNS(SVG, "defs");
    const marker = document.createElementNS(SVG, "marker");
    marker.setAttribute("id", "rewind-head");
    for (const [k, v] of Object.entries({ viewBox: "0 0 6 6", refX: "5", refY: "3", markerWidth: "6", markerHeight: "6", orient: "auto" })) {
      marker.setAttribute(k, v);
    }
    const head = document.createElementNS(SVG, "path");
    head.setAttribute("d", "M0,0 L6,3 L0,6 z");
    marker.appendChild(head);
    defs.appendChild(marker);
    svg.appendChild(defs);
    arrows.forEach(([rewind, mark], i) => {
      const x = 20 - (i % 3) * 6;
      const from = rewind.offsetTop + 14;
      const to = mark.offsetTop + 14;
      const path = document.createElementNS(SVG, "path");
      path.setAttribute("d", `M 29 ${from} H ${x} V ${to} H 28`);
      path.setAttribute("marker-end", "url(#rewind-head)");
      svg.appendChild(path);
    });
    list.prepend(svg);
  }
  function drawAll() { document.querySelectorAll("ol.events").forEach(drawRewinds); }
  document.addEventListener("ikigai:updated", (e) => {
    if (e.target.matches && e.target.matches("ol.events")) { drawRewinds(e.target); }
  });
  window.addEventListener("resize", drawAll);
  document.addEventListener("DOMContentLoaded", drawAll);
  if (document.readyState !== "loading") { drawAll(); }

  // Write actions ask before they act.
  document.addEventListener("submit", (e) => {
    const question = e.target.dataset && e.target.dataset.confirm;
    if (question && !window.confirm(question)) { e.preventDefault(); }
  });
  document.addEventListener("DOMContentLoaded", connect);
  if (document.readyState !== "loading") { connect(); }
})();
