"""Durable agents on runq. ``runq.agents.journal`` is runq's side (model
requests and tool calls as units of a run), for any agent framework;
``runq.agents.pydantic_ai`` is pydantic-ai's (the optional extra
``runq[pydantic-ai]``)."""
