-- A leader renews its row after each tick (Lease.Renew); a standby that
-- finds the lock held by a session whose row has not been renewed for
-- leader_stall_seconds ends that session (backend_pid) and leads: a king
-- that is frozen or hung but still connected no longer stalls dispatch on
-- every host (SPEC §12.2).
ALTER TABLE leaders
    ADD COLUMN renewed_at  timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN backend_pid integer     NOT NULL DEFAULT 0;
