// The account's event stream (GET /v1/events/stream), held with fetch so the API key goes in a
// header (EventSource cannot send one), parsed with eventsource-parser, resumed with Last-Event-ID.

import { createParser } from "./vendor/eventsource-parser/index.js";

const RETRY_MS = [1000, 2000, 5000];
const DEFAULT_HEARTBEAT_S = 15;

/** Follows the stream until stop(): onOpen when it is live, onEvent(event JSON) per event, onDrop when it is lost. */
export function follow(key, { onOpen, onEvent, onDrop }) {
  let lastId = null;
  let controller = null;
  let stopped = false;
  let failures = 0;

  async function connectOnce() {
    controller = new AbortController();
    const headers = { Accept: "text/event-stream", Authorization: `Bearer ${key}` };
    if (lastId !== null) headers["Last-Event-ID"] = lastId;
    const res = await fetch("/v1/events/stream", { headers, cache: "no-store", signal: controller.signal });
    if (res.status === 400) lastId = null; // the service no longer has that event: start afresh
    if (!res.ok || !res.body) throw new Error(`stream answered ${res.status}`);
    failures = 0;
    onOpen();
    // Silence longer than two heartbeats means the connection is dead, even if no close came.
    let heartbeatS = DEFAULT_HEARTBEAT_S;
    let watchdog = null;
    const rearm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => controller.abort(), (2 * heartbeatS + 2) * 1000);
    };
    const parser = createParser({
      onEvent(message) {
        if (message.id) lastId = message.id;
        onEvent(JSON.parse(message.data));
      },
      onComment(comment) {
        const announced = /^heartbeat (\d+(?:\.\d+)?)$/.exec(comment.trim());
        if (announced) heartbeatS = Number(announced[1]);
      },
    });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        rearm();
        const { value, done } = await reader.read();
        if (done) return;
        parser.feed(value);
      }
    } finally {
      clearTimeout(watchdog);
    }
  }

  (async () => {
    while (!stopped) {
      try {
        await connectOnce();
      } catch (err) {
        if (stopped) return;
        console.debug("event stream lost:", err);
      }
      if (stopped) return;
      onDrop();
      const wait = RETRY_MS[Math.min(failures++, RETRY_MS.length - 1)];
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  })();

  return {
    stop() {
      stopped = true;
      controller?.abort();
    },
  };
}
