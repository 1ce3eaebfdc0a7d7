-- Verify runq:argument_check_class_key on pg

\set function 'runq._check_class_key(text, text)'
\set callers ''
\ir lib/function.sql
