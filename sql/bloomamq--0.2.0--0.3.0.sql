-- bloomamq 0.2.0 -> 0.3.0: the amq index access method, selectivity
-- estimators for the containment operators, and automatic join pre-filters.

\echo Use "ALTER EXTENSION bloomamq UPDATE TO '0.3.0'" to load this file. \quit

--------------------------------------------------------------------------------
-- Selectivity of the containment operators
--------------------------------------------------------------------------------

--------------------------------------------------------------------------------
-- Join pre-filtering
--------------------------------------------------------------------------------

--------------------------------------------------------------------------------
-- The amq index access method
--------------------------------------------------------------------------------
