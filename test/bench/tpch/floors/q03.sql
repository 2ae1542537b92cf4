SELECT count(*) FROM customer WHERE c_mktsegment = 'BUILDING';
SELECT count(*) FROM orders WHERE o_orderdate < date '1995-03-15';
SELECT count(*) FROM lineitem WHERE l_shipdate > date '1995-03-15';
