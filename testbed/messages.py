"""The log messages ActionScheduler_Logger writes, in English and in a translation.

Action Scheduler translates the words of each message (`__()`), never the runner's
context: a German site logs "Aktion gestartet über WP CLI". The German texts here are
this project's own, written the way a translation file would: they exist to show that
the exporter does not depend on the English words.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Messages:
    created: str
    started: str  # %s: the runner's context
    complete: str  # %s: the context
    failed: str  # %(via)s, %(error)s
    timed_out: str  # %s: seconds
    fatal: str  # %(error)s, %(file)s, %(line)s
    reset: str
    canceled: str
    ignored: str  # %s: the context
    consistently_failing: str
    next_instance_failed: str  # %s: the exception message
    corrupted: str  # 4.0+: a runner could not read the action's data and canceled it

    def start(self, via: str) -> str:
        return self.started % via

    def completion(self, via: str) -> str:
        return self.complete % via

    def failure(self, via: str, error: str) -> str:
        return self.failed % {"via": via, "error": error}


ENGLISH = Messages(
    created="action created",
    started="action started via %s",
    complete="action complete via %s",
    failed="action failed via %(via)s: %(error)s",
    timed_out=(
        "action marked as failed after %s seconds. Unknown error occurred. Check server, "
        "PHP and database error logs to diagnose cause."
    ),
    fatal="unexpected shutdown: PHP Fatal error %(error)s in %(file)s on line %(line)s",
    reset="action reset",
    canceled="action canceled",
    ignored="action ignored via %s",
    consistently_failing=(
        "This action appears to be consistently failing. A new instance will not be scheduled."
    ),
    next_instance_failed="There was a failure scheduling the next instance of this action: %s",
    corrupted=(
        "This action data appears to be corrupt. We are cancelling it to allow recurring "
        "actions to be re-created by extensions."
    ),
)

GERMAN = Messages(
    created="Aktion erstellt",
    started="Aktion gestartet über %s",
    complete="Aktion abgeschlossen über %s",
    failed="Aktion fehlgeschlagen über %(via)s: %(error)s",
    timed_out=(
        "Aktion nach %s Sekunden als fehlgeschlagen markiert. Unbekannter Fehler. Prüfe die "
        "Server-, PHP- und Datenbank-Fehlerprotokolle."
    ),
    fatal="Unerwartetes Herunterfahren: PHP Fatal error %(error)s in %(file)s in Zeile %(line)s",
    reset="Aktion zurückgesetzt",
    canceled="Aktion abgebrochen",
    ignored="Aktion ignoriert über %s",
    consistently_failing=(
        "Diese Aktion scheint dauerhaft fehlzuschlagen. Eine neue Instanz wird nicht geplant."
    ),
    next_instance_failed=(
        "Beim Planen der nächsten Instanz dieser Aktion ist ein Fehler aufgetreten: %s"
    ),
    corrupted=(
        "Die Daten dieser Aktion scheinen beschädigt zu sein. Sie wird abgebrochen, damit "
        "Erweiterungen wiederkehrende Aktionen neu anlegen können."
    ),
)
