"""Queries an FDSN event service with ObsPy's own FDSN client, as a seismologist's script would.

Usage: obspy_client.py BASE_URL QUERIES_JSON

QUERIES_JSON is a list of keyword-argument objects for `Client.get_events` (times as ISO strings, turned into
UTCDateTime). Prints, as JSON, one entry per query: the string "nodata" when the service had no event, else the
events ObsPy parsed from the QuakeML, each with its id, type, description, preferred origin and magnitude, and
how many origins and magnitudes it carries. Any other failure (a parameter the WADL does not allow, a malformed
answer) ends the script with its traceback.
"""

import json
import sys
import warnings

from obspy import UTCDateTime
from obspy.clients.fdsn import Client
from obspy.clients.fdsn.header import FDSNNoDataException

TIMES = {"starttime", "endtime", "updatedafter"}


def event_summary(event):
    origin = event.preferred_origin()
    magnitude = event.preferred_magnitude()
    return {
        "id": str(event.resource_id),
        "type": event.event_type,
        "description": event.event_descriptions[0].text if event.event_descriptions else None,
        "origins": len(event.origins),
        "magnitudes": len(event.magnitudes),
        "time": origin.time.isoformat() + "Z" if origin else None,
        "latitude": origin.latitude if origin else None,
        "longitude": origin.longitude if origin else None,
        "depthKm": origin.depth / 1000.0 if origin and origin.depth is not None else None,
        "evaluationStatus": origin.evaluation_status if origin else None,
        "evaluationMode": origin.evaluation_mode if origin else None,
        "magnitude": magnitude.mag if magnitude else None,
    }


def main():
    base, queries = sys.argv[1], json.loads(sys.argv[2])
    with warnings.catch_warnings():
        # A service without dataselect and station is an event service only: ObsPy says so, rightly.
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        client = Client(base)
    assert "event" in client.services, client.services
    results = []
    for query in queries:
        kwargs = {k: UTCDateTime(v) if k in TIMES else v for k, v in query.items()}
        try:
            catalog = client.get_events(**kwargs)
        except FDSNNoDataException:
            results.append("nodata")
            continue
        results.append([event_summary(event) for event in catalog])
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
