"""Ferry's own rows of two result files side by side (median wall, CPU, other load).

    python bench/compare.py results/full.json results/sdk-rerun.json > table.md

Issue 12: no workload may get slower than the recorded run. "slower" here = the new median
above the old max (outside the old run's own spread); the CPU time is the figure the other
load of the machine disturbs least, so it is shown beside it.
"""

import json
import sys

WORKLOADS = [("csv_to_parquet", "1. CSV → Parquet"), ("generate", "2. generation → blackhole"),
             ("sql", "3. Sql transform"), ("startup", "4. start-up")]


def main(old_path, new_path):
    old, new = json.load(open(old_path)), json.load(open(new_path))
    print(f"| workload | Ferry row | old median s (min–max) | new median s (min–max) | new / old | old CPU s | "
          f"new CPU s | old other load | new other load | verdict |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for key, label in WORKLOADS:
        olds = {s["name"]: s for s in old["results"].get(key, []) if "wall_median" in s}
        for s in new["results"].get(key, []):
            if not s["name"].startswith("ferry") or "wall_median" not in s or s["name"] not in olds:
                continue
            o = olds[s["name"]]
            ratio = s["wall_median"] / o["wall_median"]
            if s["wall_median"] <= o["wall_max"]:
                verdict = "not slower" + (" (faster)" if s["wall_median"] < o["wall_min"] else " (within the old spread)")
            else:
                cpu_ratio = s["cpu_s"] / o["cpu_s"] if o.get("cpu_s") else float("nan")
                verdict = (f"**slower** (wall {100 * (ratio - 1):+.0f} %, CPU {100 * (cpu_ratio - 1):+.0f} %)")
            ms = 1000 if key == "startup" else 1
            unit = " ms" if key == "startup" else ""
            print(f"| {label} | {s['name']} | {o['wall_median'] * ms:.3g}{unit} ({o['wall_min'] * ms:.3g}–{o['wall_max'] * ms:.3g}) | "
                  f"{s['wall_median'] * ms:.3g}{unit} ({s['wall_min'] * ms:.3g}–{s['wall_max'] * ms:.3g}) | {ratio:.2f} | "
                  f"{o.get('cpu_s', float('nan')):.2f} | {s.get('cpu_s', float('nan')):.2f} | "
                  f"{o.get('other_cores', 0):.2f} | {s.get('other_cores', 0):.2f} | {verdict} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
