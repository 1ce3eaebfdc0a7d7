-- Verify runq:argument_checks on pg

-- The checks and predicates: SQL-standard bodies the planner inlines, so
-- IMMUTABLE (a mutable call would stop the inlining, and cost PL/pgSQL a
-- snapshot per expression); the helper accepts them without a pinned
-- search_path because no search_path reaches such a body.
\set function 'runq._bad_argument(text, text, anyelement); runq._check_identifier(text, text, boolean); runq._check_count(text, integer); runq._check_duration(text, interval); runq._check_object(text, jsonb); runq._check_jsonb(text, jsonb); runq._check_choice(text, text, text); runq._check_classes(text, integer[]); runq._check_names(text, text[]); runq._first_bad_class(integer[]); runq._is_count(integer); runq._is_duration(interval); runq._is_classes(integer[]); runq._is_names(text[])'
\set callers ''
\set volatility i
\ir lib/function.sql
\set function 'runq._run_not_found(bigint)'
\ir lib/function.sql
