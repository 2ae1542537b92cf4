SELECT count(*) FROM part WHERE p_type = 'ECONOMY ANODIZED STEEL';
SELECT count(*) FROM supplier;
SELECT count(*) FROM lineitem;
SELECT count(*) FROM orders WHERE o_orderdate BETWEEN date '1995-01-01' AND date '1996-12-31';
SELECT count(*) FROM customer;
SELECT count(*) FROM nation;
SELECT count(*) FROM nation;
SELECT count(*) FROM region WHERE r_name = 'AMERICA';
