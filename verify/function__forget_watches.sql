-- Verify runq:function__forget_watches on pg

\set function 'runq._forget_watches()'
\set callers ''
\ir lib/function.sql
