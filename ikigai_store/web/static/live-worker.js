// One EventSource for every tab of this origin (a SharedWorker): browsers keep 6 HTTP/1.1
// connections per host, so a stream per tab would stall the view at the sixth tab.
// Each tab's port gets every message; a tab says "bye" on pagehide, and the stream closes
// when no tab is left.
"use strict";
const ports = new Set();
let source = null;
let state = "connecting";

function broadcast(message) {
  for (const port of ports) {
    port.postMessage(message);
  }
}

function setState(next) {
  state = next;
  broadcast({ type: "status", state });
}

function open() {
  source = new EventSource("/live");
  source.addEventListener("open", () => setState("live"));
  source.addEventListener("error", () => {
    if (source && source.readyState === EventSource.CLOSED) {
      // The server refused the stream (e.g. 401): try again later, from scratch.
      source = null;
      setState("offline");
      setTimeout(() => { if (ports.size && !source) { open(); } }, 3000);
    } else {
      setState("reconnecting");
    }
  });
  source.addEventListener("change", (e) => broadcast({ type: "change", data: JSON.parse(e.data) }));
  source.addEventListener("reset", () => broadcast({ type: "reset" }));
}

self.onconnect = (event) => {
  const port = event.ports[0];
  ports.add(port);
  port.onmessage = (e) => {
    if (e.data && e.data.bye) {
      ports.delete(port);
      if (!ports.size && source) {
        source.close();
        source = null;
      }
    }
  };
  port.start();
  if (!source) {
    open();
  }
  port.postMessage({ type: "status", state });
};
