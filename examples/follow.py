#!/usr/bin/env python3
"""Follow the archive live over Server-Sent Events without losing or repeating a report.

Stores each report (one JSON line in STORE), then persists its id as the cursor (CURSOR, written atomically),
so a restart or a dropped connection resumes right after the last report stored. Backs off on 429 and 503 as
the API asks (Retry-After, else from 1 s doubling to 30 s), and when the service says the cursor is ahead of
its archive (409 cursor_ahead_of_archive: another archive, or one restored from a backup) starts again from
the archive's current position. Standard library only.

    python3 examples/follow.py http://127.0.0.1:8080/api/v1 --cursor cursor.json --store reports.jsonl
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request


def load_cursor(path):
    try:
        with open(path) as f:
            state = json.load(f)
        return state.get("cursor"), state.get("archiveId")
    except FileNotFoundError:
        return None, None


def save_cursor(path, cursor, archive_id):
    # Written beside and renamed over: a crash leaves the old cursor or the new one, never half of one.
    temporary = path + ".tmp"
    with open(temporary, "w") as f:
        json.dump({"cursor": cursor, "archiveId": archive_id}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def events(response):
    """Yields (event, data, id) for each SSE event of the response."""
    event, data, event_id = "message", [], None
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                yield event, "\n".join(data), event_id
            event, data, event_id = "message", [], None
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                event_id = value


def current_position(base):
    """The archive's newest id and identity, to start from after a 409."""
    with urllib.request.urlopen(base + "/reports?limit=1") as response:
        page = json.load(response)
    return page["highWater"], page["archiveId"]


def follow(base, cursor_path, store_path, max_reports):
    cursor, archive_id = load_cursor(cursor_path)
    stored = 0
    delay = 1.0
    while max_reports is None or stored < max_reports:
        url = base + "/stream" + ("" if cursor is None else f"?after={cursor}")
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                delay = 1.0
                for event, data, event_id in events(response):
                    message = json.loads(data)
                    if event == "ready":
                        if archive_id is not None and message["archiveId"] != archive_id:
                            print(f"the archive changed ({archive_id} -> {message['archiveId']}): "
                                  "reports stored after its backup may be gone from it", file=sys.stderr)
                        archive_id = message["archiveId"]
                        if cursor is None:
                            cursor = message["cursor"]
                            save_cursor(cursor_path, cursor, archive_id)
                    elif event == "report":
                        with open(store_path, "a") as store:
                            store.write(json.dumps(message, ensure_ascii=False) + "\n")
                            store.flush()
                            os.fsync(store.fileno())
                        cursor = int(event_id)
                        save_cursor(cursor_path, cursor, archive_id)
                        stored += 1
                        if max_reports is not None and stored >= max_reports:
                            return stored
        except urllib.error.HTTPError as error:
            body = json.loads(error.read() or b"{}")
            if error.code == 409 and body.get("code") == "cursor_ahead_of_archive":
                cursor, archive_id = current_position(base)
                print(f"cursor ahead of the archive: starting again at {cursor}", file=sys.stderr)
                save_cursor(cursor_path, cursor, archive_id)
                continue
            if error.code not in (429, 503):
                raise
            retry_after = error.headers.get("Retry-After")
            wait = float(retry_after) if retry_after else delay
            print(f"{error.code} {body.get('code')}: retrying in {wait:.0f} s", file=sys.stderr)
            time.sleep(wait)
            delay = min(delay * 2, 30.0)
            continue
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            print(f"connection lost ({error}): retrying in {delay:.0f} s", file=sys.stderr)
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
            continue
        # The server ended the stream (its lifetime, a restart): resume from the cursor at once.
    return stored


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the API's base URL, ending in /api/v1")
    parser.add_argument("--cursor", default="cursor.json", help="where the cursor is kept")
    parser.add_argument("--store", default="reports.jsonl", help="where reports are stored, one per line")
    parser.add_argument("--max-reports", type=int, help="stop after storing this many reports")
    args = parser.parse_args()
    follow(args.base.rstrip("/"), args.cursor, args.store, args.max_reports)


if __name__ == "__main__":
    main()
