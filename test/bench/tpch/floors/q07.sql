SELECT count(*) FROM supplier;
SELECT count(*) FROM lineitem WHERE l_shipdate BETWEEN date '1995-01-01' AND date '1996-12-31';
SELECT count(*) FROM orders;
SELECT count(*) FROM customer;
SELECT count(*) FROM nation WHERE n_name IN ('FRANCE', 'GERMANY');
SELECT count(*) FROM nation WHERE n_name IN ('FRANCE', 'GERMANY');
