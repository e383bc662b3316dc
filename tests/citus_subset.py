"""The tests that run against a Citus cluster: ``pytest -m citus`` with IKIGAI_TEST_DATABASE_URL at
the coordinator (docs/concepts/citus.md, "Testing on a cluster"; .ci/run does it).

Every area is covered: the event store (appends, replay, agents, sessions, search, export and
import), every coordination area (with the queue-claim and lease races: exactly-once claims, one
winner per exclusive lease, the task races: one claimer, one completion activity), and the
property tests and state machines. The mail race tests are left out for time (CI's budget):
those tables are plain tables on the coordinator, where the same tests run on plain
PostgreSQL, and the mail state machine runs here. Only the sync face runs there: both faces
run the same SQL, and the cluster's budget in CI is small. A test that checks something only
plain PostgreSQL has is left out here, each with the reason (the rest of its file runs).
``tests/conftest.py`` applies the marker.
"""

from __future__ import annotations

#: Test files (relative to tests/) of the subset.
FILES = {
    # event store
    "integration/test_append.py",
    "integration/test_replay.py",
    "integration/test_sessions.py",
    "integration/test_agents.py",
    "integration/test_search.py",
    "integration/test_portability.py",
    "integration/test_summaries.py",
    "integration/test_langgraph.py",
    "integration/test_claude_agent.py",
    # coordination
    "integration/test_identities.py",
    "integration/test_mail.py",
    "integration/test_topics.py",
    "integration/test_topics_concurrency.py",
    "integration/test_leases.py",
    "integration/test_leases_concurrency.py",
    "integration/test_tasks.py",
    "integration/test_tasks_concurrency.py",
    "integration/test_reviews.py",
    "integration/test_plans.py",
    "integration/test_activities.py",
    "integration/test_watch.py",
    "integration/test_wake.py",
    # the cluster itself
    "integration/test_citus.py",
    "integration/test_citus_routing.py",
    # property tests and state machines
    "property/test_replay_machine.py",
    "property/test_agent_machine.py",
    "property/test_mail_machine.py",
    "property/test_topics_machine.py",
    "property/test_lease_machine.py",
    "property/test_task_machine.py",
    "property/test_review_machine.py",
    "property/test_langgraph_model.py",
}

#: Tests of those files left out on the cluster, and why (name without the face's parameter).
LEFT_OUT = {
    "test_replay_reads_only_after_last_clear": "asserts plain PostgreSQL's plan text",
    "test_plans_use_the_intended_indexes": "asserts plain PostgreSQL's plan text",
    "test_feed_is_index_driven": "asserts plain PostgreSQL's plan text",
    "test_stored_vector_follows_content": (
        "forges search_vector by hand: plain PostgreSQL's trigger recomputes it, Citus' "
        "generated column refuses the write (either way no forged vector is stored)"
    ),
    # It passes there (the searches across sessions collect in one statement, search_fanout),
    # but runs hundreds of searches under each of six strategy settings: about 36 s a setting.
    "test_strategy_agrees_with_the_oracle": "six runs of ~36 s each on the 2-worker cluster",
    "test_iteration_numbers_are_unique_in_the_schema": (
        "asserts Conflict.constraint of a hand-written INSERT ... SELECT: Citus reports a "
        "shard's key (review_iterations_num_key_<shard>) as XX000 without the constraint field "
        "(the key, with review_id, refuses the row there too)"
    ),
    "test_schema_enforces_agent_session": (
        "inserts events by hand to hit messages' foreign keys, which a distributed messages "
        "does not have (the appends check the same in their statement)"
    ),
}
