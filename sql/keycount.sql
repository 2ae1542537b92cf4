--
-- Key counts saturate at 2^62, the largest count the input gate accepts, so
-- that a filter accepted on input is still accepted after adds and unions:
-- its text form reads back, and a dump of it restores.
--

-- bloom filters for 4 keys whose headers say 2^62 keys, one of them with
-- every bit set (valid input: only the counts are extreme)
CREATE TABLE extreme (name text, f amqfilter);
INSERT INTO extreme VALUES
	('empty', 'QU1RRgEBAQEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAEB7FK5H4XqEP0AAAAAAAAAACwAAAAAAAAAAAAAAAAAAAAgAAAAAAAAAhxmwsTyJOkMAAAAAAAAAAA=='),
	('full', 'QU1RRgEBAQEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAEB7FK5H4XqEP0AAAAAAAAAACwAAAAAAAAAAAAAAAAAAAAgAAAAAAAAAcyWv3dVnPIX//////////w=='),
	('counting', 'QU1RRgEEAQEAAAAAAAAAAAAAAAAAAAAA/////////z97FK5H4XqEPzAAAAAAAAAACAAAAAAAAAAAAAAAAAAAABgAAAAAAAAAEDWyp4VDW70AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=');

-- adding keys leaves the count at 2^62; counting filters count every add
SELECT name, amq_count(f) AS before, amq_count(amq_add(amq_add(f, 1), 2)) AS after
FROM extreme ORDER BY name;

-- the results read back: text and binary (bytea) forms
SELECT name, amq_add(amq_add(f, 1), 2)::text::amqfilter::bytea = amq_add(amq_add(f, 1), 2)::bytea AS reads_back
FROM extreme ORDER BY name;

-- a union estimates its count from bits (a full filter: infinitely many),
-- within the sum of the inputs' counts, and saturates too
SELECT a.name, b.name, amq_count(a.f | b.f) AS count,
	(a.f | b.f)::text::amqfilter::bytea = (a.f | b.f)::bytea AS reads_back
FROM extreme a, extreme b WHERE a.name <= b.name AND a.name <> 'counting' AND b.name <> 'counting'
ORDER BY 1, 2;
SELECT amq_count(amq_union_agg(f)) FROM extreme WHERE name <> 'counting';

DROP TABLE extreme;
