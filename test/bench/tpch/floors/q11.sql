-- the query and its HAVING subquery each read partsupp, supplier and nation
SELECT count(*) FROM partsupp;
SELECT count(*) FROM supplier;
SELECT count(*) FROM nation WHERE n_name = 'GERMANY';
SELECT count(*) FROM partsupp;
SELECT count(*) FROM supplier;
SELECT count(*) FROM nation WHERE n_name = 'GERMANY';
