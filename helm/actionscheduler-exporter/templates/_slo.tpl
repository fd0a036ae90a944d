{{- /*
The service level objectives of slo.objectives, as python -m slo writes them (slo/ in the
repository; tests/test_slo_chart.py renders both and holds them equal). Numbers are
printed with six significant digits, as Python's "g" format does.
*/ -}}

{{- define "ase.sloBuckets" -}}0.5 1 5 15 30 60 120 300 600 1800 3600 7200 21600 86400{{- end -}}

{{- define "ase.sloIsNumber" -}}{{ if or (kindIs "float64" .) (kindIs "int64" .) (kindIs "int" .) }}true{{ end }}{{- end -}}

{{- define "ase.sloNumber" -}}{{ printf "%.6g" (float64 .) }}{{- end -}}

{{- /* A histogram bound as the exporter writes it in `le` (Python's repr of a float). */ -}}
{{- define "ase.sloBound" -}}
{{- $value := float64 . -}}
{{- if eq $value (floor $value) }}{{ printf "%.1f" $value }}{{ else }}{{ printf "%g" $value }}{{ end -}}
{{- end -}}

{{- /* A regex escape of each name, then its backslashes and quotes for the literal. */ -}}
{{- define "ase.sloRegex" -}}
{{- $escaped := list -}}
{{- range . }}{{ $escaped = append $escaped (include "ase.sloQuoted" (regexReplaceAll "([.+*?()|\\[\\]{}^$\\\\])" . "\\${1}")) }}{{ end -}}
{{- join "|" $escaped -}}
{{- end -}}

{{- define "ase.sloQuoted" -}}{{ . | replace "\\" "\\\\" | replace "\"" "\\\"" }}{{- end -}}

{{- /* One objective of a scope: {percent, within}; checks it, naming the key. */ -}}
{{- define "ase.sloObjective" -}}
{{- $raw := .raw -}}
{{- if and (not (kindIs "invalid" $raw)) (not (kindIs "map" $raw)) -}}
{{- fail (printf "%s: must be a mapping" .key) -}}
{{- end -}}
{{- $raw = $raw | default dict -}}
{{- range $name, $_ := $raw -}}
{{- if not (has $name (list "objective" "withinSeconds")) -}}
{{- fail (printf "%s.%s: is not a known key (known: objective%s)" $.key $name (ternary ", withinSeconds" "" $.latency)) -}}
{{- end -}}
{{- if and (eq $name "withinSeconds") (not $.latency) -}}
{{- fail (printf "%s.withinSeconds: is not a known key (known: objective)" $.key) -}}
{{- end -}}
{{- end -}}
{{- $percent := $raw.objective -}}
{{- if and (kindIs "invalid" $percent) .default }}{{ $percent = .default.percent }}{{ end -}}
{{- if or (not (include "ase.sloIsNumber" $percent)) (le (float64 $percent) 0.0) (ge (float64 $percent) 100.0) -}}
{{- fail (printf "%s.objective: must be a percentage above 0 and below 100, not %v" .key $percent) -}}
{{- end -}}
{{- $_ := set .out "percent" (float64 $percent) -}}
{{- if .latency -}}
{{- $within := $raw.withinSeconds -}}
{{- if and (kindIs "invalid" $within) .default }}{{ $within = .default.within }}{{ end -}}
{{- $bounds := splitList " " (include "ase.sloBuckets" .) -}}
{{- $isBound := false -}}
{{- if include "ase.sloIsNumber" $within -}}
{{- range $bounds }}{{ if eq (float64 .) (float64 $within) }}{{ $isBound = true }}{{ end }}{{ end -}}
{{- end -}}
{{- if .native -}}
{{- /* histogram_fraction reads any threshold of a native histogram */ -}}
{{- if or (not (include "ase.sloIsNumber" $within)) (le (float64 $within) 0.0) -}}
{{- fail (printf "%s.withinSeconds: must be a number of seconds above 0, not %v" .key $within) -}}
{{- end -}}
{{- else if not $isBound -}}
{{- fail (printf "%s.withinSeconds: must be a bucket bound of actionscheduler_action_start_delay_seconds (%s), not %v" .key (join ", " $bounds) $within) -}}
{{- end -}}
{{- $_ := set .out "within" (float64 $within) -}}
{{- end -}}
{{- end -}}

{{- /* The scopes of slo.objectives into .scopes: the defaults, named sites, named groups. */ -}}
{{- define "ase.sloScopes" -}}
{{- $doc := .objectives -}}
{{- range $name, $_ := $doc -}}
{{- if not (has $name (list "window" "minimumRuns" "defaults" "sites" "groups")) -}}
{{- fail (printf "slo.objectives.%s: is not a known key (known: defaults, groups, minimumRuns, sites, window)" $name) -}}
{{- end -}}
{{- end -}}
{{- $window := toString ($doc.window | default "28d") -}}
{{- if not (regexMatch "^[1-9][0-9]*d$" $window) -}}
{{- fail (printf "slo.objectives.window: must be whole days such as 28d or 30d, not %q" $window) -}}
{{- end -}}
{{- $_ := set . "window" $window -}}
{{- $_ := set . "days" (trimSuffix "d" $window | atoi) -}}
{{- $minimum := $doc.minimumRuns | default 20 -}}
{{- if or (not (include "ase.sloIsNumber" $minimum)) (lt (float64 $minimum) 1.0) (ne (float64 $minimum) (floor (float64 $minimum))) -}}
{{- fail (printf "slo.objectives.minimumRuns: must be a whole number of runs, 1 or more, not %v" $minimum) -}}
{{- end -}}
{{- $_ := set . "minimumRuns" (int $minimum) -}}
{{- $defaults := $doc.defaults | default dict -}}
{{- range $key := list "startOnTime" "success" -}}
{{- if not (hasKey $defaults $key) -}}
{{- fail (printf "slo.objectives.defaults.%s: is missing: the defaults state both objectives" $key) -}}
{{- end -}}
{{- end -}}
{{- $start := dict -}}
{{- $_ := include "ase.sloObjective" (dict "raw" $defaults.startOnTime "key" "slo.objectives.defaults.startOnTime" "latency" true "native" $.native "out" $start "default" nil) -}}
{{- $success := dict -}}
{{- $_ := include "ase.sloObjective" (dict "raw" $defaults.success "key" "slo.objectives.defaults.success" "latency" false "native" $.native "out" $success "default" nil) -}}
{{- $scopes := list (dict "kind" "default" "name" "" "start" $start "success" $success) -}}
{{- range $kind, $section := dict "site" "sites" "group" "groups" -}}
{{- $entries := index $doc $section | default dict -}}
{{- range $name := keys $entries | sortAlpha -}}
{{- $entry := index $entries $name | default dict -}}
{{- $key := printf "slo.objectives.%s.%s" $section $name -}}
{{- if regexMatch "[\\x00-\\x1f\\x7f]" $name -}}
{{- fail (printf "slo.objectives.%s[%q]: must not hold control characters (a newline, a tab...): no rule can match it" $section $name) -}}
{{- end -}}
{{- range $token := list "$window" "{{" "}}" -}}
{{- if contains $token $name -}}
{{- fail (printf "slo.objectives.%s[%q]: must not hold %q: the forms use it where a query's range goes" $section $name $token) -}}
{{- end -}}
{{- end -}}
{{- range $sli, $_ := $entry -}}
{{- if not (has $sli (list "startOnTime" "success")) -}}
{{- fail (printf "%s.%s: is not a known key (known: startOnTime, success)" $key $sli) -}}
{{- end -}}
{{- end -}}
{{- $ownStart := dict -}}
{{- $_ := include "ase.sloObjective" (dict "raw" $entry.startOnTime "key" (printf "%s.startOnTime" $key) "latency" true "native" $.native "out" $ownStart "default" $start) -}}
{{- $ownSuccess := dict -}}
{{- $_ := include "ase.sloObjective" (dict "raw" $entry.success "key" (printf "%s.success" $key) "latency" false "native" $.native "out" $ownSuccess "default" $success) -}}
{{- $scopes = append $scopes (dict "kind" $kind "name" $name "start" $ownStart "success" $ownSuccess) -}}
{{- end -}}
{{- end -}}
{{- /* python -m slo orders sites before groups */ -}}
{{- $ordered := list -}}
{{- range $kind := list "default" "site" "group" }}{{ range $scopes }}{{ if eq .kind $kind }}{{ $ordered = append $ordered . }}{{ end }}{{ end }}{{ end -}}
{{- $_ := set . "scopes" $ordered -}}
{{- $sites := list -}}{{- $groups := list -}}
{{- range $ordered -}}
{{- if eq .kind "site" }}{{ $sites = append $sites .name }}{{ end -}}
{{- if eq .kind "group" }}{{ $groups = append $groups .name }}{{ end -}}
{{- end -}}
{{- $_ := set . "sites" $sites -}}
{{- $_ := set . "groups" $groups -}}
{{- end -}}

{{- /* The SLI of (.scope, .sli) under .objectives (a ase.sloScopes context): sets .slug,
.by, .errors, .total (with $window for the range), .totalCounter, .good, .bad. */ -}}
{{- define "ase.sloSli" -}}
{{- $s := .scope -}}
{{- $notGroups := list -}}
{{- with .all.groups }}{{ $notGroups = list (printf "group!~\"%s\"" (include "ase.sloRegex" .)) }}{{ end -}}
{{- $matchers := list -}}
{{- $by := "site" -}}
{{- if eq $s.kind "group" -}}
{{- $matchers = list (printf "group=\"%s\"" (include "ase.sloQuoted" $s.name)) -}}
{{- $by = "site, group" -}}
{{- else if eq $s.kind "site" -}}
{{- $matchers = concat (list (printf "site=\"%s\"" (include "ase.sloQuoted" $s.name))) $notGroups -}}
{{- else -}}
{{- with .all.sites }}{{ $matchers = list (printf "site!~\"%s\"" (include "ase.sloRegex" .)) }}{{ end -}}
{{- $matchers = concat $matchers $notGroups -}}
{{- if not $matchers }}{{ $matchers = list "site!=\"\"" }}{{ end -}}
{{- end -}}
{{- $selector := printf "{%s}" (join ", " $matchers) -}}
{{- /* unique: a name the safe spelling changed gets a short hash of itself (queries.slo_name) */ -}}
{{- $safe := regexReplaceAll "[^a-z0-9]" (lower $s.name) "-" | trimAll "-" -}}
{{- if ne $safe $s.name -}}
{{- $digest := sha256sum $s.name | trunc 6 -}}
{{- $safe = ternary (printf "%s-%s" $safe $digest) $digest (ne $safe "") -}}
{{- end -}}
{{- $_ := set . "slug" (ternary .sli (printf "%s-%s-%s" .sli $s.kind $safe) (eq $s.kind "default")) -}}
{{- $_ := set . "by" $by -}}
{{- $native := .all.native -}}
{{- if and (eq .sli "start-on-time") $native -}}
{{- $histogram := printf "actionscheduler_action_start_delay_seconds%s" $selector -}}
{{- $total := printf "sum by (%s) (histogram_count(rate(%s[$window])))" $by $histogram -}}
{{- $_ := set . "total" $total -}}
{{- $_ := set . "errors" (printf "(%s * (1 - histogram_fraction(0, %s, sum by (%s) (rate(%s[$window])))))" $total (include "ase.sloNumber" $s.start.within) $by $histogram) -}}
{{- $_ := set . "runs" (printf "sum by (%s) (histogram_count(increase(%s[$window])))" $by $histogram) -}}
{{- $_ := set . "totalCounter" $histogram -}}
{{- $_ := set . "good" "" -}}
{{- $_ := set . "bad" "" -}}
{{- $_ := set . "percent" $s.start.percent -}}
{{- else if eq .sli "start-on-time" -}}
{{- $count := printf "actionscheduler_action_start_delay_seconds_count%s" $selector -}}
{{- $good := printf "actionscheduler_action_start_delay_seconds_bucket{%s}" (join ", " (append $matchers (printf "le=\"%s\"" (include "ase.sloBound" $s.start.within)))) -}}
{{- $total := printf "sum by (%s) (rate(%s[$window]))" $by $count -}}
{{- $_ := set . "total" $total -}}
{{- $_ := set . "errors" (printf "(%s - sum by (%s) (rate(%s[$window])))" $total $by $good) -}}
{{- $_ := set . "totalCounter" $count -}}
{{- $_ := set . "runs" (printf "sum by (%s) (increase(%s[$window]))" $by $count) -}}
{{- $_ := set . "good" $good -}}
{{- $_ := set . "bad" "" -}}
{{- $_ := set . "percent" $s.start.percent -}}
{{- else -}}
{{- $every := printf "actionscheduler_actions_finished_total%s" $selector -}}
{{- $bad := printf "actionscheduler_actions_finished_total{%s}" (join ", " (append $matchers "outcome=\"failed\"")) -}}
{{- $_ := set . "errors" (printf "sum by (%s) (rate(%s[$window]))" $by $bad) -}}
{{- $_ := set . "total" (printf "sum by (%s) (rate(%s[$window]))" $by $every) -}}
{{- $_ := set . "totalCounter" $every -}}
{{- $_ := set . "runs" (printf "sum by (%s) (increase(%s[$window]))" $by $every) -}}
{{- $_ := set . "good" "" -}}
{{- $_ := set . "bad" $bad -}}
{{- $_ := set . "percent" $s.success.percent -}}
{{- end -}}
{{- $where := dict "default" "every site and group without objectives of their own" "site" (printf "site %s" $s.name) "group" (printf "group %s on every site" $s.name) -}}
{{- $promise := printf "%s %% of runs do not fail" (include "ase.sloNumber" $s.success.percent) -}}
{{- if eq .sli "start-on-time" -}}
{{- $promise = printf "%s %% of runs start within %s s of being due" (include "ase.sloNumber" $s.start.percent) (include "ase.sloNumber" $s.start.within) -}}
{{- end -}}
{{- $_ := set . "promise" $promise -}}
{{- $_ := set . "description" (printf "%s: %s." $promise (index $where $s.kind)) -}}
{{- $_ := set . "alert" (ternary "ActionSchedulerStartOnTimeBudgetBurn" "ActionSchedulerSuccessBudgetBurn" (eq .sli "start-on-time")) -}}
{{- end -}}

{{- /* The rules document (groups) of .objectives into .groups. */ -}}
{{- define "ase.sloRules" -}}
{{- $all := . -}}
{{- $errors := "slo:actionscheduler_sli_errors:ratio_rate" -}}
{{- $windows := list "5m" "30m" "1h" "2h" "6h" "1d" "3d" -}}
{{- $burn := list (dict "severity" "page" "long" "1h" "short" "5m" "seconds" 3600 "share" 0.02) (dict "severity" "page" "long" "6h" "short" "30m" "seconds" 21600 "share" 0.05) (dict "severity" "ticket" "long" "1d" "short" "2h" "seconds" 86400 "share" 0.1) (dict "severity" "ticket" "long" "3d" "short" "6h" "seconds" 259200 "share" 0.1) -}}
{{- $words := dict "1h" "hour" "6h" "six hours" "1d" "day" "3d" "three days" -}}
{{- $fast := list -}}
{{- $slow := list -}}
{{- range $scope := $all.scopes -}}
{{- range $name := list "start-on-time" "success" -}}
{{- $sli := dict "all" $all "scope" $scope "sli" $name -}}
{{- $_ := include "ase.sloSli" $sli -}}
{{- $labels := dict "slo" $sli.slug "sli" $name -}}
{{- range $window := $windows -}}
{{- $fast = append $fast (dict "record" (printf "%s%s" $errors $window) "expr" (printf "%s\n/\n%s" ($sli.errors | replace "$window" $window) ($sli.total | replace "$window" $window)) "labels" $labels) -}}
{{- end -}}
{{- $recorded := printf "{slo=\"%s\"}" $sli.slug -}}
{{- $budget := include "ase.sloNumber" (subf 1 (divf $sli.percent 100)) -}}
{{- range $severity := list "page" "ticket" -}}
{{- $conditions := list -}}
{{- $rates := list -}}
{{- range $w := $burn -}}
{{- if eq $w.severity $severity -}}
{{- /* never below 1.1 (slo/windows.py): a threshold at or under the budget fires at the objective */ -}}
{{- $exact := maxf (divf (mulf $w.share (mul $all.days 86400)) $w.seconds) 1.1 -}}
{{- $rate := include "ase.sloNumber" $exact -}}
{{- $limit := printf "(%s * %s)" $rate $budget -}}
{{- /* enough runs that one bad run cannot cross the threshold alone, and minimumRuns */ -}}
{{- $needed := max (int (ceil (round (divf 1 (mulf $exact (subf 1 (divf $sli.percent 100)))) 6))) $all.minimumRuns -}}
{{- $conditions = append $conditions (printf "(\n  %s%s%s > %s\n  and %s%s%s > %s\n  and on (%s) %s >= %d\n)" $errors $w.long $recorded $limit $errors $w.short $recorded $limit $sli.by ($sli.runs | replace "$window" $w.long) $needed) -}}
{{- $rates = append $rates (dict "rate" $rate "word" (index $words $w.long)) -}}
{{- end -}}
{{- end -}}
{{- $first := index $rates 0 -}}{{- $second := index $rates 1 -}}
{{- $rateText := printf "%s times as fast as allowed over the last %s, or %s times over the last %s" $first.rate $first.word $second.rate $second.word -}}
{{- $what := ternary (printf "started more than %s s after they were due" (include "ase.sloNumber" $scope.start.within)) "failed" (eq $name "start-on-time") -}}
{{- $group := ternary " (group {{ $labels.group }})" "" (eq $scope.kind "group") -}}
{{- $summary := ternary "Runs of {{ $labels.site }} start late:" "Runs of {{ $labels.site }} fail:" (eq $name "start-on-time") -}}
{{- $description := printf "{{ $value | humanizePercentage }} of the runs of site {{ $labels.site }}%s %s over the alert's window; the objective (%s, over %s) allows %s %%. The error budget burns at least %s." $group $what $sli.promise $all.window (include "ase.sloNumber" (subf 100 $sli.percent)) $rateText -}}
{{- $annotations := dict "summary" (printf "%s the %s error budget burns %s." $summary $name (ternary "fast" "steadily" (eq $severity "page"))) "description" $description "runbook_url" (printf "https://github.com/actionscheduler-exporter/actionscheduler-exporter/blob/main/docs/runbooks/slo-%s-budget-burn.md" $name) "dashboard" "d/actionscheduler-slo?var-site={{ $labels.site }}&var-slo={{ $labels.slo }}" -}}
{{- $fast = append $fast (dict "alert" $sli.alert "expr" (printf "%s\n" (join "\nor\n" $conditions)) "labels" (merge (dict "severity" (ternary "critical" "warning" (eq $severity "page"))) $labels) "annotations" $annotations) -}}
{{- end -}}
{{- $total := $sli.total | replace "$window" $all.window -}}
{{- $slow = append $slow (dict "record" (printf "%s%s" $errors $all.window) "expr" (printf "%s\n/\n%s" ($sli.errors | replace "$window" $all.window) $total) "labels" $labels) -}}
{{- $slow = append $slow (dict "record" "slo:actionscheduler_sli_objective:ratio" "expr" (printf "0 * %s + %s" $total (include "ase.sloNumber" (divf $sli.percent 100))) "labels" $labels) -}}
{{- $slow = append $slow (dict "record" "slo:actionscheduler_error_budget_remaining:ratio" "expr" (printf "1 - %s%s%s / %s" $errors $all.window $recorded $budget) "labels" $labels) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $all "groups" (list (dict "name" "actionscheduler-slo" "rules" $fast) (dict "name" "actionscheduler-slo-window" "interval" "5m" "rules" $slow)) -}}
{{- end -}}

{{- /* Pyrra ServiceLevelObjective specs of .objectives into .resources (name, spec). */ -}}
{{- define "ase.sloPyrra" -}}
{{- $all := . -}}
{{- $resources := list -}}
{{- range $scope := $all.scopes -}}
{{- range $name := list "start-on-time" "success" -}}
{{- $sli := dict "all" $all "scope" $scope "sli" $name -}}
{{- $_ := include "ase.sloSli" $sli -}}
{{- $grouping := splitList ", " $sli.by -}}
{{- $indicator := dict "ratio" (dict "errors" (dict "metric" $sli.bad) "total" (dict "metric" $sli.totalCounter) "grouping" $grouping) -}}
{{- if eq $name "start-on-time" -}}
{{- $indicator = dict "latency" (dict "success" (dict "metric" $sli.good) "total" (dict "metric" $sli.totalCounter) "grouping" $grouping) -}}
{{- end -}}
{{- $alerting := dict "name" $sli.alert "absent" false "severities" (dict "fastBurn" "critical" "mediumBurn" "critical" "slowBurn" "warning" "longTermBurn" "warning") -}}
{{- $spec := dict "description" $sli.description "target" (include "ase.sloNumber" $sli.percent) "window" $all.window "indicator" $indicator "alerting" $alerting -}}
{{- $resources = append $resources (dict "name" (printf "actionscheduler-%s" $sli.slug) "spec" $spec) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $all "resources" $resources -}}
{{- end -}}
