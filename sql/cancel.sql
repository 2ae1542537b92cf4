--
-- A query cancel takes effect inside a filter build, not after it: the
-- server sets the core's poll hook to CHECK_FOR_INTERRUPTS.  The cancel is
-- sent to the session itself in the expression that passes the keys to
-- amq_from_array, so no check of the executor lies between the signal and
-- the build; the build's first check then raises it, and the assignment
-- never happens.  Without the hook the build would end and assign, and the
-- next statement's check would raise the cancel.  Each kind, after being
-- cancelled midway, builds the same bytes as before.
--
DO $$
DECLARE
	keys int8[] := ARRAY(SELECT generate_series(1, 200000)::int8);
	kind text;
	f amqfilter;
	before amqfilter;
BEGIN
	FOREACH kind IN ARRAY ARRAY['bloom', 'blocked', 'twobit', 'counting', 'cuckoo', 'scalable',
								'xor', 'fuse', 'ribbon'] LOOP
		before := amq_from_array(keys, 0.01, kind);
		f := NULL;
		BEGIN
			f := CASE WHEN pg_cancel_backend(pg_backend_pid())
				 THEN amq_from_array(keys, 0.01, kind) END;
			RAISE NOTICE '%: not cancelled', kind;
		EXCEPTION WHEN query_canceled THEN
			RAISE NOTICE '%: cancelled %', kind,
				CASE WHEN f IS NULL THEN 'within the build' ELSE 'after it' END;
		END;
		RAISE NOTICE '%: the next build gives the same bytes: %', kind,
			amq_from_array(keys, 0.01, kind)::bytea = before::bytea;
	END LOOP;
END $$;
