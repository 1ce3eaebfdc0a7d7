-- Verify runq:function__swap_in on pg

\set function 'runq._swap_in(integer[], text[], integer)'
\set callers ''
\ir lib/function.sql
