#!/usr/bin/python3
"""Writes to the amq index: inserts beside a btree's, and space reuse under
steady deletes, inserts and VACUUM.

    test/bench/bench_space.py [N] [CYCLES]     (default N=1,000,000, 20 cycles)

Inserts: N random bigint keys into an empty table with no index, with an
amq index and with a btree (alternating, the median of 3 rounds each), then
N/10 into the free space a VACUUM left after deleting a random tenth.

Space reuse:
A table of N rows with an amq index on an unclustered bigint key; each
cycle deletes a random tenth of the rows, inserts as many rows of new keys
(they go to the space the deletes left, in every range) and runs VACUUM.
After each cycle it prints the index's size, and after the last the size of
an index built afresh on the same rows, and checks the reused index with
amq_index_check(..., heapallindexed => true).  The figure is the reused
index's size against the fresh build's (largest over the cycles, and at the
end).  Exits non-zero only on an SQL error or a failed check.

Runs against a PostgreSQL you started (PGHOST, PGPORT, PGUSER as for psql),
with autovacuum off for the table.
"""
import statistics
import sys
import time

from benchlib import connect, run

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
CYCLES = int(sys.argv[2]) if len(sys.argv) > 2 else 20
conn = connect()
conn.autocommit = True
run(conn, "CREATE EXTENSION IF NOT EXISTS bloomamq")
run(conn, "SET maintenance_work_mem = '512MB'")


def insert_seconds(index, rows, prepare=None):
    """Seconds to insert rows random keys into ins_t with the index ('none',
    'amq' or 'btree'); prepare fills and vacuums the table first."""
    run(conn, "DROP TABLE IF EXISTS ins_t")
    run(conn, "CREATE TABLE ins_t (id bigint, pad text) WITH (autovacuum_enabled = off)")
    if prepare:
        prepare()
    if index != "none":
        run(conn, f"CREATE INDEX ins_i ON ins_t USING {index} (id)")
    run(conn, "CHECKPOINT")
    t0 = time.perf_counter()
    run(conn, f"INSERT INTO ins_t SELECT (random() * 9e18)::bigint, 'x' FROM generate_series(1, {rows})")
    return time.perf_counter() - t0


def filled():
    run(conn, f"INSERT INTO ins_t SELECT (random() * 9e18)::bigint, 'x' FROM generate_series(1, {N})")
    run(conn, "DELETE FROM ins_t WHERE random() < 0.1")
    run(conn, "VACUUM ins_t")


print(f"# inserts: {N} random bigint keys into an empty table; {N // 10} into a vacuumed one's free space")
print(f"{'index':>6} {'empty table s':>14} {'free space s':>13}")
samples = {index: ([], []) for index in ("none", "amq", "btree")}
for _ in range(3):
    for index in samples:
        samples[index][0].append(insert_seconds(index, N))
        samples[index][1].append(insert_seconds(index, N // 10, filled))
times = {index: (statistics.median(a), statistics.median(b)) for index, (a, b) in samples.items()}
for index in samples:
    print(f"{index:>6} {times[index][0]:>14.2f} {times[index][1]:>13.2f}")
print(f"amq / btree: {times['amq'][0] / times['btree'][0]:.2f} (empty table), "
      f"{times['amq'][1] / times['btree'][1]:.2f} (free space)")
run(conn, "DROP TABLE ins_t")

run(conn, "DROP TABLE IF EXISTS space_t")
run(conn, "CREATE TABLE space_t (id bigint, k bigint, pad text) WITH (autovacuum_enabled = off)")
run(conn, "SELECT setseed(0.5)")
run(conn, f"INSERT INTO space_t SELECT g, (random() * 1e15)::bigint, 'x' "
          f"FROM generate_series(1, {N}) g")
run(conn, "CREATE INDEX space_amq ON space_t USING amq (k)")
run(conn, "VACUUM space_t")


def pages(rel):
    return run(conn, f"SELECT pg_relation_size('{rel}') / current_setting('block_size')::int")[0][0]


start = pages("space_amq")
print(f"# N={N}, {CYCLES} cycles of deleting and inserting {N // 10} rows, VACUUM between")
print(f"# heap pages {pages('space_t')}, amq index built: {start} pages")
print(f"{'cycle':>5} {'index pages':>12} {'vs built':>9} {'VACUUM s':>9}")
sizes = []
next_id = N + 1
for c in range(1, CYCLES + 1):
    run(conn, f"DELETE FROM space_t WHERE id IN "
              f"(SELECT id FROM space_t ORDER BY random() LIMIT {N // 10})")
    run(conn, f"INSERT INTO space_t SELECT g, (random() * 1e15)::bigint, 'x' "
              f"FROM generate_series({next_id}, {next_id + N // 10 - 1}) g")
    next_id += N // 10
    t0 = time.perf_counter()
    run(conn, "VACUUM space_t")
    vac = time.perf_counter() - t0
    sizes.append(pages("space_amq"))
    print(f"{c:>5} {sizes[-1]:>12} {sizes[-1] / start:>9.3f} {vac:>9.2f}")

run(conn, "SELECT amq_index_check('space_amq', heapallindexed => true)")
run(conn, "CREATE INDEX space_fresh ON space_t USING amq (k)")
fresh = pages("space_fresh")
print(f"# fresh build on the final rows: {fresh} pages; amq_index_check(heapallindexed) passed")
print(f"reused index vs fresh build: at the end {sizes[-1] / fresh:.3f}x, "
      f"largest over the cycles {max(sizes) / fresh:.3f}x")
run(conn, "DROP TABLE space_t")
