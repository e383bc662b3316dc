-- The offline outbox (ikigai_store.outbox): a local SQLite file, not PostgreSQL. These queries
-- are loaded with aiosql's sqlite3 adapter, apart from the others (sql.LOCAL_FILES).
-- Times are Unix seconds (REAL), passed in by the caller (:now), never SQLite's clock.
-- A row is pending -> delivering (one drainer holds it, :claim) -> delivered | failed, or back
-- to pending (retry); a pending row whose expires_at has passed becomes expired.

-- name: outbox_setup()#
-- Create the schema if the file is new (idempotent); user_version 1 is this layout.
CREATE TABLE IF NOT EXISTS pending_operations (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT    NOT NULL UNIQUE,
    operation       TEXT    NOT NULL
                    CHECK (operation IN ('send', 'reply', 'publish', 'heartbeat')),
    payload         TEXT    NOT NULL CHECK (json_valid(payload)),
    sender          TEXT    NOT NULL,
    created_at      REAL    NOT NULL,
    expires_at      REAL    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error      TEXT,
    status          TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivering', 'delivered', 'failed', 'expired')),
    claim           TEXT    CHECK ((claim IS NOT NULL) = (status = 'delivering')),
    changed_at      REAL    NOT NULL,
    mail_id         INTEGER
);
CREATE INDEX IF NOT EXISTS pending_operations_status ON pending_operations (status, id);
PRAGMA user_version = 1;

-- name: outbox_version()^
-- The file's layout version (0: an empty file, before outbox_setup).
PRAGMA user_version;

-- name: outbox_enqueue(key, operation, payload, sender, now, expires_at, max_pending)!
-- Add a pending operation unless the key is already in the file or max_pending operations are
-- still undelivered (one statement: the check and the insert cannot be separated by another
-- process). 0 rows: see outbox_get to tell which.
INSERT INTO pending_operations
       (idempotency_key, operation, payload, sender, created_at, expires_at, changed_at)
SELECT :key, :operation, :payload, :sender, :now, :expires_at, :now
 WHERE (SELECT count(*) FROM pending_operations WHERE status IN ('pending', 'delivering'))
       < :max_pending
    ON CONFLICT (idempotency_key) DO NOTHING;

-- name: outbox_get(key)^
-- The operation with this idempotency key, if any.
SELECT * FROM pending_operations WHERE idempotency_key = :key;

-- name: outbox_recover(now, stale_before, error)!
-- Operations a drainer claimed before :stale_before and never settled (it crashed or was
-- killed): back to pending, counted as an attempt. Redelivery is safe: the key is unique per
-- sender on the server.
UPDATE pending_operations
   SET status = 'pending', claim = NULL, attempts = attempts + 1, last_error = :error,
       changed_at = :now
 WHERE status = 'delivering' AND changed_at <= :stale_before;

-- name: outbox_expire(now)!
-- Pending operations whose time to live has passed: expired (never delivered).
UPDATE pending_operations
   SET status = 'expired', changed_at = :now
 WHERE status = 'pending' AND expires_at <= :now;

-- name: outbox_purge(before)!
-- Forget finished operations (delivered, failed, expired) that finished before :before.
DELETE FROM pending_operations
 WHERE status IN ('delivered', 'failed', 'expired') AND changed_at < :before;

-- name: outbox_claim(claim, now)!
-- Take the oldest pending operation that has not expired (FIFO) for one drainer.
UPDATE pending_operations
   SET status = 'delivering', claim = :claim, changed_at = :now
 WHERE id = (SELECT id FROM pending_operations
              WHERE status = 'pending' AND expires_at > :now
              ORDER BY id LIMIT 1);

-- name: outbox_claimed(claim)^
-- The operation this drainer holds.
SELECT * FROM pending_operations WHERE claim = :claim AND status = 'delivering';

-- name: outbox_settle(claim, status, error, mail_id, now)!
-- Record the delivery attempt of the operation a drainer holds: delivered, failed (refused by
-- the store) or pending again (retry later). 0 rows: it was recovered as stale meanwhile.
UPDATE pending_operations
   SET status = :status, claim = NULL, attempts = attempts + 1, last_error = :error,
       mail_id = COALESCE(:mail_id, mail_id), changed_at = :now
 WHERE claim = :claim;

-- name: outbox_list(finished)
-- Operations in FIFO order; finished ones (delivered, failed, expired) only when :finished.
SELECT * FROM pending_operations
 WHERE :finished OR status IN ('pending', 'delivering')
 ORDER BY id;

-- name: outbox_stats()^
-- How many operations are in each state.
SELECT coalesce(sum(status = 'pending'), 0)    AS pending,
       coalesce(sum(status = 'delivering'), 0) AS delivering,
       coalesce(sum(status = 'delivered'), 0)  AS delivered,
       coalesce(sum(status = 'failed'), 0)     AS failed,
       coalesce(sum(status = 'expired'), 0)    AS expired
  FROM pending_operations;

-- name: outbox_clear(everything)!
-- Delete finished operations, or every operation when :everything (undelivered ones are lost).
DELETE FROM pending_operations
 WHERE :everything OR status IN ('delivered', 'failed', 'expired');
