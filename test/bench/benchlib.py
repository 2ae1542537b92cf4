"""What the Python benchmarks of test/bench share: a session, a statement
runner, a timer, and the dataset they measure on.

Everything here is the repository's own, so that a clone of bloomamq alone
runs its benchmarks.  Needs Debian's python3-psycopg2 (tools/setup --bench).

The server is the one libpq's environment names: PGHOST, PGPORT, PGUSER and
PGDATABASE, as tools/pgcluster exports them for its throwaway cluster.  PGUSER
and PGDATABASE default to postgres rather than to the login name.

The dataset (kept as the README's figures were measured on, so that runs
stay comparable):

  t_big    N rows, i = 1..N in insertion order:
             id   bigint  i * 2654435761 mod 2^40  (a multiplicative hash:
                          distinct, random-looking, not clustered on the heap)
             id4  int4    i
             k    text    'user_' || i
  t_one    one column, the id of t_big's rows i = 1..n (bench.py: n = N/2), so
           that the per-row cost of an aggregate is not hidden by wide rows
  t_small  about M keys: the ids (and k) of every (2N div M)-th row of t_big,
           i = 1, 1 + step, ..., about M/2 of them, all present in t_big; and
           M/2 keys absent from it: id = -1 .. -M/2, k = 'nouser_' || j.

Each table carries the sizes it was built for in its comment, so that a run
with other sizes rebuilds it instead of measuring the wrong one.
"""
import os
import statistics
import time

import psycopg2

# id of t_big's i-th row: i * ID_MULT mod ID_MOD
ID_MULT = 2654435761
ID_MOD = 1 << 40


def connect(dbname=None):
    """A new session on the server of the environment (see above)."""
    # host and port are left to libpq, which reads PGHOST and PGPORT (a
    # socket directory or a host name) exactly as psql does
    return psycopg2.connect(dbname=dbname or os.environ.get("PGDATABASE") or "postgres",
                            user=os.environ.get("PGUSER") or "postgres")


def run(conn, sql):
    """Execute sql; its rows as a list of tuples, or None if it returns none."""
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall() if cur.description is not None else None


def timed(conn, sql, n=5):
    """Run sql n times: (median wall seconds, fastest wall seconds, the rows of
    the last run).  Only measures; what to make of the time is the caller's."""
    walls = []
    rows = None
    for _ in range(max(n, 1)):
        start = time.perf_counter()
        rows = run(conn, sql)
        walls.append(time.perf_counter() - start)
    return statistics.median(walls), min(walls), rows


def _built_for(conn, table):
    """The comment t_big or t_small was built with, None if it does not exist."""
    rows = run(conn, "SELECT coalesce(obj_description(c.oid, 'pg_class'), '') "
                     f"FROM pg_class c WHERE c.relname = '{table}' "
                     "AND c.relnamespace = 'public'::regnamespace")
    return rows[0][0] if rows else None


def _id_of(i_sql):
    return f"(({i_sql})::bigint * {ID_MULT}) % {ID_MOD}"


def ensure_one_column(conn, n):
    """Make t_one exist: one bigint column, the ids of t_big's rows i = 1..n
    (t_big must hold at least n rows); rebuilt if built for another n."""
    tag = f"bloomamq bench t_one N={n}"
    if _built_for(conn, "t_one") == tag:
        return False
    run(conn, "DROP TABLE IF EXISTS t_one")
    run(conn, f"CREATE TABLE t_one AS SELECT {_id_of('i')} AS id "
              f"FROM generate_series(1, {n}) AS g(i)")
    run(conn, f"COMMENT ON TABLE t_one IS '{tag}'")
    run(conn, "VACUUM ANALYZE t_one")
    return True


def ensure_dataset(conn, n, m=None):
    """Make t_big (n rows) exist, and t_small (m keys) unless m is None, as
    described at the top; a table built for other sizes is rebuilt.  Returns
    True if something was (re)built."""
    if n < 1:
        raise SystemExit("benchlib: t_big needs N >= 1")
    if m is not None and (m < 2 or 2 * n // m < 1):
        raise SystemExit("benchlib: t_small needs M >= 2 and N >= M/2")
    big_tag = f"bloomamq bench t_big N={n}"
    small_tag = f"bloomamq bench t_small N={n} M={m}"
    built = False
    if _built_for(conn, "t_big") != big_tag:
        # t_small's keys are t_big's: it goes with it
        run(conn, "DROP TABLE IF EXISTS t_big, t_small")
        run(conn, f"""CREATE TABLE t_big AS
                      SELECT {_id_of('i')} AS id, i::int4 AS id4, 'user_' || i AS k
                      FROM generate_series(1, {n}) AS g(i)""")
        run(conn, f"COMMENT ON TABLE t_big IS '{big_tag}'")
        run(conn, "VACUUM ANALYZE t_big")
        built = True
    if m is not None and _built_for(conn, "t_small") != small_tag:
        step = 2 * n // m
        run(conn, "DROP TABLE IF EXISTS t_small")
        run(conn, f"""CREATE TABLE t_small AS
                      SELECT {_id_of('i')} AS id, 'user_' || i AS k
                      FROM generate_series(1, {n}, {step}) AS present(i)
                      UNION ALL
                      SELECT -j::bigint, 'nouser_' || j
                      FROM generate_series(1, {m // 2}) AS absent(j)""")
        run(conn, f"COMMENT ON TABLE t_small IS '{small_tag}'")
        run(conn, "VACUUM ANALYZE t_small")
        built = True
    return built
