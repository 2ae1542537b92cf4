#!/usr/bin/python3
"""Space reuse of the amq index under steady deletes, inserts and VACUUM.

    test/bench/bench_space.py [N] [CYCLES]     (default N=1,000,000, 20 cycles)

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
import sys
import time

from benchlib import connect, run

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
CYCLES = int(sys.argv[2]) if len(sys.argv) > 2 else 20
conn = connect()
conn.autocommit = True
run(conn, "CREATE EXTENSION IF NOT EXISTS bloomamq")
run(conn, "SET maintenance_work_mem = '512MB'")
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
