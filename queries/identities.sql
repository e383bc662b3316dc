-- Identities: named participants of mail (migration 0007). Identity rows are never deleted.

-- name: register_identity(name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid, parent_id)^
-- Create an identity (a child of parent_id when given); no row when the name (or the agent
-- binding) is taken or the agent does not exist (identities.py explains which).
INSERT INTO identities (name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid,
                        parent_id)
SELECT :name, :project_key, :git_branch, :purpose, :working_dir, :hostname, :agent_uuid,
       :parent_id
WHERE CAST(:agent_uuid AS text) IS NULL
   OR EXISTS (SELECT 1 FROM agents WHERE uuid = :agent_uuid)
ON CONFLICT DO NOTHING
RETURNING id, name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid,
          created_at, last_active_at, retired_at,
          (SELECT p.name FROM identities AS p WHERE p.id = identities.parent_id) AS parent;

-- name: register_refusal(name, agent_uuid)^
-- Why register_identity wrote nothing (rare path).
SELECT EXISTS (SELECT 1 FROM identities WHERE name = :name) AS name_taken,
       EXISTS (SELECT 1 FROM agents WHERE uuid = :agent_uuid) AS agent_exists,
       (SELECT name FROM identities WHERE agent_uuid = :agent_uuid) AS bound_to;

-- name: get_identity(name)^
-- One identity by name.
SELECT id, name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid,
       created_at, last_active_at, retired_at,
       (SELECT p.name FROM identities AS p WHERE p.id = identities.parent_id) AS parent
FROM identities
WHERE name = :name;

-- name: list_identities(project_key, include_retired)
-- Identities, most recently active first (id breaks ties: newest first).
SELECT id, name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid,
       created_at, last_active_at, retired_at,
       (SELECT p.name FROM identities AS p WHERE p.id = identities.parent_id) AS parent
FROM identities
WHERE (CAST(:project_key AS text) IS NULL OR project_key = :project_key)
  AND (:include_retired OR retired_at IS NULL)
ORDER BY last_active_at DESC, id DESC;

-- name: heartbeat_identity(name)^
-- last_active_at = now for an identity that is not retired; no row otherwise.
UPDATE identities SET last_active_at = ikigai_now()
WHERE name = :name AND retired_at IS NULL
RETURNING id, name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid,
          created_at, last_active_at, retired_at,
          (SELECT p.name FROM identities AS p WHERE p.id = identities.parent_id) AS parent;

-- name: retire_identity(name)^
-- Retire an identity (retiring again keeps the first time). Its mail stays.
UPDATE identities SET retired_at = COALESCE(retired_at, ikigai_now())
WHERE name = :name
RETURNING id, name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid,
          created_at, last_active_at, retired_at,
          (SELECT p.name FROM identities AS p WHERE p.id = identities.parent_id) AS parent;

-- name: discover_identities(project_key)
-- Identities that are not retired, with their unread count (passed snoozes included) and a
-- status from last_active_at: active (< 5 min), idle (< 30 min), offline. One statement.
SELECT i.id, i.name, i.project_key, i.git_branch, i.purpose, i.working_dir, i.hostname,
       i.agent_uuid, i.created_at, i.last_active_at, i.retired_at,
       (SELECT p.name FROM identities AS p WHERE p.id = i.parent_id) AS parent,
       (SELECT count(*) FROM mail_recipients AS r
        WHERE r.identity_id = i.id
          AND r.state IN ('unread', 'snoozed')
          AND (r.state = 'unread' OR r.snoozed_until <= ikigai_now())) AS unread,
       CASE WHEN i.last_active_at > ikigai_now() - interval '5 minutes' THEN 'active'
            WHEN i.last_active_at > ikigai_now() - interval '30 minutes' THEN 'idle'
            ELSE 'offline' END AS status
FROM identities AS i
WHERE i.retired_at IS NULL
  AND (CAST(:project_key AS text) IS NULL OR i.project_key = :project_key)
ORDER BY i.last_active_at DESC, i.id DESC;

-- name: lock_identity_key(key)^
-- Serialise resolutions of one session key or agent (transaction-scoped advisory lock), so
-- concurrent first calls create one identity, not two.
SELECT pg_advisory_xact_lock(hashtextextended(:key, 7)) IS NOT NULL AS locked;

-- name: touch_session_identity(session_key)^
-- The identity a session key maps to, when it is not retired; refreshes both last_active_at.
WITH s AS (
    UPDATE session_identities AS s SET last_active_at = ikigai_now()
    FROM identities AS i
    WHERE s.session_key = :session_key AND i.id = s.identity_id AND i.retired_at IS NULL
    RETURNING s.identity_id
)
UPDATE identities AS i SET last_active_at = ikigai_now()
FROM s
WHERE i.id = s.identity_id
RETURNING i.id, i.name, i.project_key, i.git_branch, i.purpose, i.working_dir, i.hostname,
          i.agent_uuid, i.created_at, i.last_active_at, i.retired_at,
          (SELECT p.name FROM identities AS p WHERE p.id = i.parent_id) AS parent;

-- name: project_identity(project_key)^
-- The project's most recently active identity that is not retired.
SELECT id, name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid,
       created_at, last_active_at, retired_at,
       (SELECT p.name FROM identities AS p WHERE p.id = identities.parent_id) AS parent
FROM identities
WHERE project_key = :project_key AND retired_at IS NULL
ORDER BY last_active_at DESC, id DESC
LIMIT 1;

-- name: map_session_identity(session_key, identity_id, project_key, git_branch)^
-- Map a session key to an identity (replacing a mapping to a retired one) and refresh the
-- identity's last_active_at.
WITH m AS (
    INSERT INTO session_identities (session_key, identity_id, project_key, git_branch)
    VALUES (:session_key, :identity_id, :project_key, :git_branch)
    ON CONFLICT (session_key) DO UPDATE
    SET identity_id = EXCLUDED.identity_id, project_key = EXCLUDED.project_key,
        git_branch = EXCLUDED.git_branch, last_active_at = ikigai_now()
    RETURNING identity_id
)
UPDATE identities AS i SET last_active_at = ikigai_now()
FROM m
WHERE i.id = m.identity_id
RETURNING i.id, i.name, i.project_key, i.git_branch, i.purpose, i.working_dir, i.hostname,
          i.agent_uuid, i.created_at, i.last_active_at, i.retired_at,
          (SELECT p.name FROM identities AS p WHERE p.id = i.parent_id) AS parent;

-- name: touch_agent_identity(agent_uuid)^
-- The identity bound to a runtime agent, with last_active_at refreshed.
UPDATE identities SET last_active_at = ikigai_now()
WHERE agent_uuid = :agent_uuid
RETURNING id, name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid,
          created_at, last_active_at, retired_at,
          (SELECT p.name FROM identities AS p WHERE p.id = identities.parent_id) AS parent;

-- name: set_identity_parent(identity_id, parent_id)^
-- Link an identity to the identity that started it (resolve, for a child made before 0017).
UPDATE identities SET parent_id = :parent_id
WHERE id = :identity_id
RETURNING id, name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid,
          created_at, last_active_at, retired_at,
          (SELECT p.name FROM identities AS p WHERE p.id = :parent_id) AS parent;

-- name: retire_idle_identities(idle_for, project_key)
-- Retire the identities (of one project) not active for idle_for that hold no live lease
-- (a running watcher holds one); their role and session keys are unmapped, so the agent, if it
-- comes back, gets a new identity. Returns the identities retired, oldest activity first.
WITH idle AS (
    SELECT i.id
    FROM identities AS i
    WHERE i.retired_at IS NULL
      AND i.last_active_at < ikigai_now() - CAST(:idle_for AS interval)
      AND (CAST(:project_key AS text) IS NULL OR i.project_key = :project_key)
      AND NOT EXISTS (SELECT 1 FROM leases AS l
                      WHERE l.holder_id = i.id AND l.expires_at > ikigai_now())
    FOR UPDATE OF i SKIP LOCKED
), unmapped AS (
    DELETE FROM session_identities AS s USING idle WHERE s.identity_id = idle.id
)
UPDATE identities AS i SET retired_at = ikigai_now()
FROM idle
WHERE i.id = idle.id
RETURNING i.id, i.name, i.project_key, i.git_branch, i.purpose, i.working_dir, i.hostname,
          i.agent_uuid, i.created_at, i.last_active_at, i.retired_at,
          (SELECT p.name FROM identities AS p WHERE p.id = i.parent_id) AS parent;

-- name: prune_identities(retired_for)
-- Delete the identities retired for longer than retired_for that nothing refers to
-- (prune_identities(), migration 0017); returns their names.
SELECT prune_identities(ikigai_now() - CAST(:retired_for AS interval)) AS name;
