SELECT count(*) FROM customer;
SELECT count(*) FROM orders
WHERE o_orderdate >= date '1993-10-01' AND o_orderdate < date '1993-10-01' + interval '3 months';
SELECT count(*) FROM lineitem WHERE l_returnflag = 'R';
SELECT count(*) FROM nation;
