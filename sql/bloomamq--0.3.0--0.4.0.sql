-- bloomamq 0.3.0 -> 0.4.0: verification of amq indexes.

\echo Use "ALTER EXTENSION bloomamq UPDATE TO '0.4.0'" to load this file. \quit

--------------------------------------------------------------------------------
-- Verifying an amq index
--------------------------------------------------------------------------------
