"""Action Scheduler's four tables, with the columns and indexes of its schema classes
(ActionScheduler_StoreSchema version 7, ActionScheduler_LoggerSchema version 3)."""

from __future__ import annotations

ZERO_DATE = "0000-00-00 00:00:00"


def create_statements(prefix: str, charset: str = "utf8mb4") -> list[str]:
    collate = f"DEFAULT CHARACTER SET {charset}"
    return [
        f"""CREATE TABLE {prefix}actionscheduler_actions (
            action_id bigint(20) unsigned NOT NULL auto_increment,
            hook varchar(191) NOT NULL,
            status varchar(20) NOT NULL,
            scheduled_date_gmt datetime NULL default '{ZERO_DATE}',
            scheduled_date_local datetime NULL default '{ZERO_DATE}',
            priority tinyint unsigned NOT NULL default '10',
            args varchar(191),
            schedule longtext,
            group_id bigint(20) unsigned NOT NULL default '0',
            attempts int(11) NOT NULL default '0',
            last_attempt_gmt datetime NULL default '{ZERO_DATE}',
            last_attempt_local datetime NULL default '{ZERO_DATE}',
            claim_id bigint(20) unsigned NOT NULL default '0',
            extended_args varchar(8000) DEFAULT NULL,
            PRIMARY KEY (action_id),
            KEY hook_status_scheduled_date_gmt (hook(163), status, scheduled_date_gmt),
            KEY status_scheduled_date_gmt (status, scheduled_date_gmt),
            KEY scheduled_date_gmt (scheduled_date_gmt),
            KEY args (args(191)),
            KEY group_id (group_id),
            KEY last_attempt_gmt (last_attempt_gmt),
            KEY claim_id_status_scheduled_date_gmt (claim_id, status, scheduled_date_gmt)
        ) {collate}""",
        f"""CREATE TABLE {prefix}actionscheduler_claims (
            claim_id bigint(20) unsigned NOT NULL auto_increment,
            date_created_gmt datetime NULL default '{ZERO_DATE}',
            PRIMARY KEY (claim_id),
            KEY date_created_gmt (date_created_gmt)
        ) {collate}""",
        f"""CREATE TABLE {prefix}actionscheduler_groups (
            group_id bigint(20) unsigned NOT NULL auto_increment,
            slug varchar(255) NOT NULL,
            PRIMARY KEY (group_id),
            KEY slug (slug(191))
        ) {collate}""",
        f"""CREATE TABLE {prefix}actionscheduler_logs (
            log_id bigint(20) unsigned NOT NULL auto_increment,
            action_id bigint(20) unsigned NOT NULL,
            message text NOT NULL,
            log_date_gmt datetime NULL default '{ZERO_DATE}',
            log_date_local datetime NULL default '{ZERO_DATE}',
            PRIMARY KEY (log_id),
            KEY action_id (action_id),
            KEY log_date_gmt (log_date_gmt)
        ) {collate}""",
    ]


def table_names(prefix: str) -> list[str]:
    return [f"{prefix}actionscheduler_{name}" for name in ("actions", "claims", "groups", "logs")]


def before_3_7(prefix: str) -> list[str]:
    """The actions table's indexes as Action Scheduler 3.6 created them: `hook` and
    `status` alone, without 3.7's `hook_status_scheduled_date_gmt` and
    `status_scheduled_date_gmt`. 3.7.0 changed the definition but kept schema version 7,
    so a table created before it keeps these indexes until a later schema version's
    update adds the new ones (docs/action-scheduler-4.md)."""
    return [
        f"ALTER TABLE {prefix}actionscheduler_actions"
        " DROP INDEX hook_status_scheduled_date_gmt, DROP INDEX status_scheduled_date_gmt,"
        " ADD KEY hook (hook(191)), ADD KEY status (status)"
    ]
