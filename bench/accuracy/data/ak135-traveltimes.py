"""Generates ak135-traveltimes.csv: first-arriving P and S times of the ak135 Earth model (Kennett, Engdahl &
Buland 1995, GJI 122:108-124) for sources 0-700 km deep and epicentral distances 0-4,000 km, computed with
ObsPy's TauP (obspy.taup, Crotwell, Owens & Ritsema 1999, SRL 70:154-160; ObsPy: Beyreuther et al. 2010, SRL
81:530-533). The accuracy benchmark's independent truth model reads it; the detector never does.

Run once: python3 -m venv venv && venv/bin/pip install obspy==1.5.1 && venv/bin/python ak135-traveltimes.py
"""

import sys
from multiprocessing import Pool

from obspy.taup import TauPyModel

DEPTHS = range(0, 701, 10)
DISTANCES = range(0, 4001, 10)
KM_PER_DEGREE = 6371.0 * 3.141592653589793 / 180.0

_model = None


def first(depth, degrees, phases):
    arrivals = _model.get_travel_times(
        source_depth_in_km=depth, distance_in_degree=degrees, phase_list=phases
    )
    return min(a.time for a in arrivals)


def row(depth):
    global _model
    if _model is None:
        _model = TauPyModel(model="ak135")
    lines = []
    for distance in DISTANCES:
        # TauP has no ray for a receiver exactly above the source: 10 m off it.
        degrees = max(distance, 0.01) / KM_PER_DEGREE
        p = first(depth, degrees, ["ttp"])
        s = first(depth, degrees, ["tts"])
        lines.append(f"{depth},{distance},{round(p * 1000)},{round(s * 1000)}")
    return lines


if __name__ == "__main__":
    with Pool(2) as pool:
        rows = pool.map(row, DEPTHS)
    out = open(sys.argv[1] if len(sys.argv) > 1 else "ak135-traveltimes.csv", "w")
    out.write("depth_km,distance_km,p_ms,s_ms\n")
    for lines in rows:
        out.write("\n".join(lines) + "\n")
