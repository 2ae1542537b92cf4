SELECT count(*) FROM customer;
SELECT count(*) FROM orders
WHERE o_orderdate >= date '1994-01-01' AND o_orderdate < date '1994-01-01' + interval '1 year';
SELECT count(*) FROM lineitem;
SELECT count(*) FROM supplier;
SELECT count(*) FROM nation;
SELECT count(*) FROM region WHERE r_name = 'ASIA';
