#!/bin/sh
# Runs Action Scheduler batches with WP-CLI until told to stop.
#
# SIGTERM and SIGQUIT mean "finish the running batch, then stop": the signal only sets a
# flag, and the loop waits for the batch in progress before it exits. When nothing was
# due, the loop sleeps. After AS_MAX_FAILURES failed batches in a row it exits non-zero,
# so that Kubernetes restarts the worker and the restart is seen. A runner refused for
# "too many concurrent batches" has not failed: another batch runs; it sleeps like an idle
# one. Arguments are passed on to `wp action-scheduler run` (--group=..., --exclude-groups=...,
# --hooks=..., --url=... for a multisite subsite).
#
# Environment:
#   WP_CLI               the wp command (default: wp)
#   WP_PATH              the WordPress folder (default: /var/www/html)
#   AS_BATCH_SIZE        actions per batch (default: 25)
#   AS_IDLE_SLEEP        seconds to sleep when nothing was due (default: 10)
#   AS_MAX_FAILURES      failed batches in a row before giving up (default: 5)
#   AS_MAX_BATCHES       stop after this many batches, 0 for never (default: 0; CronJob form)
#   AS_HEARTBEAT_FILE    touched at every turn, for the liveness probe (default: /tmp/as-worker-heartbeat)
set -u

wp_cli=${WP_CLI:-wp}
wp_path=${WP_PATH:-/var/www/html}
batch_size=${AS_BATCH_SIZE:-25}
idle_sleep=${AS_IDLE_SLEEP:-10}
max_failures=${AS_MAX_FAILURES:-5}
max_batches=${AS_MAX_BATCHES:-0}
heartbeat=${AS_HEARTBEAT_FILE:-/tmp/as-worker-heartbeat}
output=$(mktemp "${TMPDIR:-/tmp}/as-worker.XXXXXX") || exit 1

stopping=0
trap 'stopping=1' TERM QUIT INT
trap 'rm -f "$output"' EXIT

log() {
    printf '%s as-worker: %s\n' "$(date -u '+%Y-%m-%dT%H:%M:%SZ')" "$*"
}

failures=0
batches=0
log "starting: batch size $batch_size, idle sleep ${idle_sleep}s"
while [ "$stopping" -eq 0 ]; do
    touch "$heartbeat"
    "$wp_cli" action-scheduler run --batches=1 --batch-size="$batch_size" \
        --path="$wp_path" "$@" >"$output" 2>&1 &
    batch=$!
    # A trapped signal interrupts `wait`; wait again until the batch has really ended.
    status=0
    wait "$batch" || status=$?
    while kill -0 "$batch" 2>/dev/null; do
        status=0
        wait "$batch" || status=$?
    done
    cat "$output"
    batches=$((batches + 1))

    if [ "$status" -ne 0 ] && grep -q 'too many concurrent batches' "$output"; then
        log "refused: the concurrent-batches limit is reached, another batch runs"
        failures=0
        idle=1
    elif [ "$status" -ne 0 ]; then
        failures=$((failures + 1))
        log "batch failed with status $status ($failures in a row)"
        if [ "$failures" -ge "$max_failures" ]; then
            log "giving up after $failures failed batches"
            exit 1
        fi
        idle=1
    else
        failures=0
        # WP-CLI prints "Found N scheduled tasks" before a batch; without it nothing was due
        # (or the concurrent-batches limit refused the runner).
        if grep -q '^Found [0-9]' "$output"; then idle=0; else idle=1; fi
    fi

    if [ "$max_batches" -gt 0 ] && [ "$batches" -ge "$max_batches" ]; then
        log "ran $batches batches, stopping"
        break
    fi
    if [ "$idle" -eq 1 ] && [ "$stopping" -eq 0 ]; then
        if [ "$max_batches" -gt 0 ] && [ "$status" -eq 0 ]; then
            log "nothing due, stopping"
            break
        fi
        # Sleep in the background so that a signal ends the sleep at once.
        touch "$heartbeat"
        sleep "$idle_sleep" &
        sleeper=$!
        wait "$sleeper" || kill "$sleeper" 2>/dev/null || true
    fi
done
log "stopped after $batches batches"
exit 0
