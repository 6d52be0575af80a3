#!/usr/bin/env node
// Follow the archive live over Server-Sent Events without losing or repeating a report (Node 18 or later,
// no packages): the same client as follow.py.
//
// Stores each report (one JSON line in --store), then persists its id as the cursor (--cursor, written
// atomically), so a restart or a dropped connection resumes right after the last report stored. Backs off on
// 429 and 503 as the API asks (Retry-After, else from 1 s doubling to 30 s), and when the service says the
// cursor is ahead of its archive (409 cursor_ahead_of_archive: another archive, or one restored from a
// backup) starts again from the archive's current position.
//
//   node examples/follow.mjs http://127.0.0.1:8080/api/v1 --cursor cursor.json --store reports.jsonl

import fs from "node:fs";

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : fallback;
}

const base = (process.argv[2] ?? "").replace(/\/$/, "");
const cursorPath = option("--cursor", "cursor.json");
const storePath = option("--store", "reports.jsonl");
const maxReports = option("--max-reports") ? Number(option("--max-reports")) : Infinity;
if (!base.startsWith("http")) {
  console.error("usage: node follow.mjs BASE_URL [--cursor FILE] [--store FILE] [--max-reports N]");
  process.exit(2);
}

function loadCursor() {
  try {
    const state = JSON.parse(fs.readFileSync(cursorPath, "utf8"));
    return [state.cursor ?? null, state.archiveId ?? null];
  } catch {
    return [null, null];
  }
}

// Written beside and renamed over: a crash leaves the old cursor or the new one, never half of one.
function saveCursor(cursor, archiveId) {
  const temporary = `${cursorPath}.tmp`;
  const fd = fs.openSync(temporary, "w");
  fs.writeSync(fd, JSON.stringify({ cursor, archiveId }));
  fs.fsyncSync(fd);
  fs.closeSync(fd);
  fs.renameSync(temporary, cursorPath);
}

function store(report) {
  const fd = fs.openSync(storePath, "a");
  fs.writeSync(fd, JSON.stringify(report) + "\n");
  fs.fsyncSync(fd);
  fs.closeSync(fd);
}

// Yields {event, data, id} for each event of an SSE response body.
async function* events(body) {
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "message", data = [], id = null;
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
      if (line === "") {
        if (data.length) yield { event, data: data.join("\n"), id };
        event = "message"; data = []; id = null;
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event = value;
        else if (field === "data") data.push(value);
        else if (field === "id") id = value;
      }
    }
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let [cursor, archiveId] = loadCursor();
let stored = 0;
let delay = 1000;
while (stored < maxReports) {
  let response;
  try {
    response = await fetch(`${base}/stream${cursor === null ? "" : `?after=${cursor}`}`);
  } catch (error) {
    console.error(`connection failed (${error.cause?.code ?? error.message}): retrying in ${delay / 1000} s`);
    await sleep(delay);
    delay = Math.min(delay * 2, 30000);
    continue;
  }
  if (response.status === 409) {
    const body = await response.json();
    if (body.code !== "cursor_ahead_of_archive") throw new Error(JSON.stringify(body));
    const page = await (await fetch(`${base}/reports?limit=1`)).json();
    [cursor, archiveId] = [page.highWater, page.archiveId];
    console.error(`cursor ahead of the archive: starting again at ${cursor}`);
    saveCursor(cursor, archiveId);
    continue;
  }
  if (response.status === 429 || response.status === 503) {
    const retryAfter = Number(response.headers.get("retry-after"));
    const wait = retryAfter > 0 ? retryAfter * 1000 : delay;
    console.error(`${response.status}: retrying in ${wait / 1000} s`);
    await response.body?.cancel();
    await sleep(wait);
    delay = Math.min(delay * 2, 30000);
    continue;
  }
  if (!response.ok) throw new Error(`${response.status} ${await response.text()}`);
  delay = 1000;
  try {
    for await (const { event, data, id } of events(response.body)) {
      const message = JSON.parse(data);
      if (event === "ready") {
        if (archiveId !== null && message.archiveId !== archiveId) {
          console.error(`the archive changed (${archiveId} -> ${message.archiveId}): ` +
            "reports stored after its backup may be gone from it");
        }
        archiveId = message.archiveId;
        if (cursor === null) {
          cursor = message.cursor;
          saveCursor(cursor, archiveId);
        }
      } else if (event === "report") {
        store(message);
        cursor = Number(id);
        saveCursor(cursor, archiveId);
        stored += 1;
        if (stored >= maxReports) break;
      }
    }
  } catch (error) {
    console.error(`connection lost (${error.message}): retrying in ${delay / 1000} s`);
    await sleep(delay);
    delay = Math.min(delay * 2, 30000);
  }
  // The server ended the stream (its lifetime, a restart): resume from the cursor at once.
}
process.exit(0);
