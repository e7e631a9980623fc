"""Deterministic generator of the benchmark's event table as CSV.

Every value is a pure function of the row id (splitmix64 of id and a column salt), so the
file is byte-identical on every machine and with every NumPy/pyarrow version: no random
number generator stream is involved.

Columns: id (bigint), user_id (int), event_type (string), amount (double, two decimals,
0.00–499.99, so `amount > 10` keeps about 98 %), ts (timestamp `yyyy-MM-dd HH:mm:ss` in
2024), note (string, 9–31 characters). The first line is a header.
"""

import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

EVENT_TYPES = ["view", "click", "add_to_cart", "purchase", "refund", "signup", "login", "logout"]
NOTES = [
    "ok", "late delivery", "gift wrap requested", "first order", "returning customer",
    "coupon applied", "express shipping", "address changed", "paid by card", "paid by invoice",
    "mobile app", "web checkout", "support ticket open", "loyalty points used",
    "bulk order", "pickup in store",
]
TS_BASE = 1704067200  # 2024-01-01 00:00:00 UTC
TS_SPAN = 366 * 86400
CHUNK = 1_000_000


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on uint64 (wrapping arithmetic is what we want)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def chunk_table(start: int, stop: int) -> pa.Table:
    """Rows [start, stop) as a table of text columns, formatted as they appear in the CSV."""
    ids = np.arange(start, stop, dtype=np.uint64)
    h = [splitmix64(ids * np.uint64(8) + np.uint64(salt)) for salt in range(5)]
    user_id = (h[0] % np.uint64(1_000_000)).astype(np.int64)
    event = (h[1] % np.uint64(len(EVENT_TYPES))).astype(np.int64)
    cents = (h[2] % np.uint64(50_000)).astype(np.int64)
    ts = (TS_BASE + (h[3] % np.uint64(TS_SPAN)).astype(np.int64)).astype("datetime64[s]")
    note = (h[4] % np.uint64(len(NOTES))).astype(np.int64)
    note_num = ((h[4] >> np.uint64(8)) % np.uint64(100_000)).astype(np.int64)

    cents_a = pa.array(cents)
    amount = pc.binary_join_element_wise(
        pc.cast(pc.divide(cents_a, 100), pa.string()),
        pc.utf8_lpad(pc.cast(pc.remainder(cents_a, 100), pa.string()), 2, "0"),
        ".",
    )
    return pa.table({
        "id": pc.cast(pa.array(ids.astype(np.int64)), pa.string()),
        "user_id": pc.cast(pa.array(user_id), pa.string()),
        "event_type": pa.array(EVENT_TYPES).take(pa.array(event)),
        "amount": amount,
        "ts": pc.strftime(pa.array(ts, type=pa.timestamp("s")), format="%Y-%m-%d %H:%M:%S"),
        "note": pc.binary_join_element_wise(
            pa.array(NOTES).take(pa.array(note)), pc.cast(pa.array(note_num), pa.string()), " #"
        ),
    })


def generate(path: str, rows: int) -> None:
    """Writes `rows` rows to `path` (header first)."""
    # pyarrow quotes header names whatever the quoting style: write the header ourselves.
    opts = pcsv.WriteOptions(include_header=False, quoting_style="none")
    with pa.OSFile(path, "wb") as out:
        out.write(b"id,user_id,event_type,amount,ts,note\n")
        for start in range(0, rows, CHUNK):
            pcsv.write_csv(chunk_table(start, min(rows, start + CHUNK)), out, opts)


if __name__ == "__main__":
    generate(sys.argv[1], int(sys.argv[2]))
