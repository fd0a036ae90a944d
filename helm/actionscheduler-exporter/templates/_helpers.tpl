{{/* Resource names and labels. */}}
{{- define "ase.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ase.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The worker Deployment: <fullname>-worker, or <fullname>-worker-<pool> for a pool. */}}
{{- define "ase.workerName" -}}
{{- $name := printf "%s-worker" (include "ase.fullname" .) -}}
{{- with .pool }}{{ $name = printf "%s-%s" $name .name }}{{ end -}}
{{- $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* What all pools share: the loop's ConfigMap and KEDA's TriggerAuthentication. */}}
{{- define "ase.workerBaseName" -}}
{{- printf "%s-worker" (include "ase.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The worker's render contexts, set as .contexts of the dict given ({"root": $}): the root
context itself, or with worker.pools one per pool, whose .Values.worker and .Values.keda
carry the pool's own settings and runner arguments and whose .pool is the pool.
*/}}
{{- define "ase.workerContexts" -}}
{{- $root := .root -}}
{{- $contexts := list $root -}}
{{- if $root.Values.worker.pools -}}
{{- $contexts = list -}}
{{- range $pool := $root.Values.worker.pools -}}
{{- $worker := deepCopy $root.Values.worker -}}
{{- $_ := unset $worker "pools" -}}
{{- range $key := list "batchSize" "longestActionSeconds" "idleSleepSeconds" "maxFailures" "replicas" "resources" "podDisruptionBudget" "env" -}}
{{- if hasKey $pool $key -}}{{- $_ := set $worker $key (index $pool $key) -}}{{- end -}}
{{- end -}}
{{- $args := list -}}
{{- with $pool.group -}}{{- $args = append $args (printf "--group=%s" .) -}}{{- end -}}
{{- with $pool.excludeGroups -}}{{- $args = append $args (printf "--exclude-groups=%s" (join "," .)) -}}{{- end -}}
{{- with $pool.hooks -}}{{- $args = append $args (printf "--hooks=%s" (join "," .)) -}}{{- end -}}
{{- $_ := set $worker "extraArgs" (concat $args (default list $pool.extraArgs)) -}}
{{- $keda := mergeOverwrite (deepCopy $root.Values.keda) (deepCopy (default dict $pool.keda)) -}}
{{- $values := deepCopy $root.Values -}}
{{- $_ := set $values "worker" $worker -}}
{{- $_ := set $values "keda" $keda -}}
{{- $contexts = append $contexts (dict "Values" $values "Release" $root.Release "Chart" $root.Chart "Files" $root.Files "Capabilities" $root.Capabilities "Template" $root.Template "pool" $pool) -}}
{{- end -}}
{{- end -}}
{{- $_ := set . "contexts" $contexts -}}
{{- end -}}

{{- define "ase.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "ase.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The sharded StatefulSet's headless Service, which gives each shard a DNS name. */}}
{{- define "ase.headlessServiceName" -}}
{{- printf "%s-headless" (include "ase.fullname" . | trunc 54 | trimSuffix "-") -}}
{{- end -}}

{{/*
Whether the exporter's pods mount the service account token: serviceAccount.automountServiceAccountToken
when set, else only for the Kubernetes source (the one part that calls the API).
*/}}
{{- define "ase.automountToken" -}}
{{- $set := .Values.serviceAccount.automountServiceAccountToken -}}
{{- if kindIs "bool" $set -}}
{{- if and (not $set) (include "ase.kubernetesSource" . | eq "true") -}}
{{- fail "serviceAccount.automountServiceAccountToken is false, but the Kubernetes source (kubernetesSource.enabled) reads the API with that token: turn one of them off" -}}
{{- end -}}
{{- $set -}}
{{- else -}}
{{- include "ase.kubernetesSource" . | eq "true" -}}
{{- end -}}
{{- end -}}

{{- define "ase.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ase.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: exporter
{{- end -}}

{{- define "ase.workerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "ase.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: worker
{{- with .pool }}
actionscheduler.org/worker-pool: {{ .name }}
{{- end }}
{{- end -}}

{{- define "ase.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The KEDA scaling signal for a site: due plus in-progress actions. The same text as
dashboards/queries.py (keda_query), which the overview dashboard shows; a test keeps them equal.
*/}}
{{- define "ase.kedaQuery" -}}
{{- $selector := printf "site=%q" .Values.keda.site -}}
{{- with include "ase.kedaScope" . -}}{{- $selector = printf "%s,%s" $selector . -}}{{- end -}}
{{- $site := printf "sum by (job, instance) (actionscheduler_due_actions{%s}) + sum by (job, instance) (actionscheduler_in_progress_actions{%s})" $selector $selector -}}
{{- /* Due actions beyond the split's cap are not attributed: every pool counts them. */ -}}
{{- $unsplit := printf "sum by (job, instance) (actionscheduler_due_actions_unsplit{%s})" $selector -}}
{{- $pool := default dict .pool -}}
{{- if $pool.group -}}
{{- printf "max(sum by (job, instance) (actionscheduler_due_actions_by_group{%s,group=%q}) + %s)" $selector $pool.group $unsplit -}}
{{- else if $pool.excludeGroups -}}
{{- $excluded := include "ase.alternatives" $pool.excludeGroups -}}
{{- printf "max(%s - (sum by (job, instance) (actionscheduler_due_actions_by_group{%s,group=~%q}) or 0 * %s))" $site $selector $excluded $unsplit -}}
{{- else if $pool.hooks -}}
{{- printf "max(sum by (job, instance) (actionscheduler_due_actions_by_hook{%s,hook=~%q}) + %s)" $selector (include "ase.alternatives" $pool.hooks) $unsplit -}}
{{- else -}}
{{- printf "max(%s)" $site -}}
{{- end -}}
{{- end -}}

{{/*
Render-time checks of worker.pools: names, runner arguments, and the site's concurrent-batches
limit, which all pools share: every pool at its most plus one surge pod each (a rolling
update of all pools at once) must fit, or runners are turned away.
*/}}
{{- define "ase.checkWorkerPools" -}}
{{- with .Values.worker.pools -}}
{{- if ne $.Values.worker.kind "Deployment" -}}
{{- fail "worker.pools need worker.kind Deployment: each pool is a Deployment of its own" -}}
{{- end -}}
{{- if and $.Values.keda.enabled (ne $.Values.keda.trigger "prometheus") -}}
{{- fail "worker.pools need keda.trigger prometheus: each pool scales on its own backlog, which the exporter's metrics split by group and hook" -}}
{{- end -}}
{{- if and $.Values.keda.enabled $.Values.keda.scaleTargetName -}}
{{- fail "worker.pools and keda.scaleTargetName do not go together: the chart scales the pools' own Deployments" -}}
{{- end -}}
{{- $names := list -}}
{{- $most := 0 -}}
{{- range $index, $pool := . -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,18}[a-z0-9])?$" (toString (default "" $pool.name))) -}}
{{- fail (printf "worker.pools[%d].name %q must be a short DNS label (a-z, 0-9, -; up to 20 characters): it names the pool's Deployment" $index (toString (default "" $pool.name))) -}}
{{- end -}}
{{- if has $pool.name $names -}}
{{- fail (printf "worker.pools: two pools are named %q" $pool.name) -}}
{{- end -}}
{{- $names = append $names $pool.name -}}
{{- if and $pool.group $pool.excludeGroups -}}
{{- fail (printf "worker.pools %s: give group (a pool for one group) or excludeGroups (a pool for the rest), not both" $pool.name) -}}
{{- end -}}
{{- end -}}
{{- $workers := dict "root" $ -}}
{{- $_ := include "ase.workerContexts" $workers -}}
{{- range $workers.contexts -}}
{{- $pods := ternary .Values.keda.maxReplicaCount .Values.worker.replicas .Values.keda.enabled -}}
{{- $most = add $most (int $pods) 1 -}}
{{- end -}}
{{- if gt (int $most) (int $.Values.worker.concurrentBatches) -}}
{{- fail (printf "worker.concurrentBatches (%d) is below what the pools may run (%d: every pool's maximum replicas plus one surge pod each): raise it or lower the pools' maxReplicaCount" (int $.Values.worker.concurrentBatches) (int $most)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A regular expression matching exactly the given names. */}}
{{- define "ase.alternatives" -}}
{{- $quoted := list -}}
{{- range . }}{{ $quoted = append $quoted (regexQuoteMeta .) }}{{ end -}}
{{- join "|" $quoted -}}
{{- end -}}

{{/*
Label matchers that pick this release's exporter among others in the same Prometheus: the
labels the Prometheus Operator gives the targets of the chart's own ServiceMonitor
(namespace and service) or PodMonitor (namespace and job); empty without either.
*/}}
{{- define "ase.targetScope" -}}
{{- if .Values.serviceMonitor.enabled -}}
{{- printf "namespace=%q,service=%q" .Release.Namespace (include "ase.fullname" .) -}}
{{- else if .Values.podMonitor.enabled -}}
{{- /* The operator names a PodMonitor target's job <monitor namespace>/<monitor name>. */ -}}
{{- printf "namespace=%q,job=%q" .Release.Namespace (printf "%s/%s" (default .Release.Namespace .Values.podMonitor.namespace) (include "ase.fullname" .)) -}}
{{- end -}}
{{- end -}}

{{/* The KEDA query's matchers: keda.prometheus.seriesSelector, or the targets' labels. */}}
{{- define "ase.kedaScope" -}}
{{- .Values.keda.prometheus.seriesSelector | default (include "ase.targetScope" .) -}}
{{- end -}}

{{/* The per-release rules' matchers: prometheusRule.seriesSelector, or the targets' labels. */}}
{{- define "ase.rulesScope" -}}
{{- .Values.prometheusRule.seriesSelector | default (include "ase.targetScope" .) -}}
{{- end -}}

{{/* Whether the exporter reads the chart's worker from the Kubernetes API. */}}
{{- define "ase.kubernetesSource" -}}
{{- if and .Values.kubernetesSource.enabled .Values.worker.enabled (eq .Values.worker.kind "Deployment") -}}
true
{{- end -}}
{{- end -}}

{{/* The HorizontalPodAutoscaler KEDA creates for the worker's ScaledObject. */}}
{{- define "ase.workerHPA" -}}
{{- if and .Values.keda.enabled (not .Values.keda.scaleTargetName) -}}
{{- printf "keda-hpa-%s" (include "ase.workerName" .) -}}
{{- end -}}
{{- end -}}

{{/* The worker's grace period: the running batch must be able to finish. */}}
{{- define "ase.workerGracePeriod" -}}
{{- add (mul .Values.worker.batchSize .Values.worker.longestActionSeconds) 30 -}}
{{- end -}}

{{/* The exporter's configuration file, with passwords as files and the worker's settings. */}}
{{- define "ase.exporterConfig" -}}
{{- $sites := list -}}
{{- range $index, $entry := .Values.config.sites -}}
{{- if hasKey $entry "password" -}}
{{- fail (printf "config.sites[%d].password: passwords never go into values (they would be in the release's history): put them in a Secret and name it in databasePasswords.existingSecret, a key per site name" $index) -}}
{{- end -}}
{{- if hasKey $entry "password_file" -}}
{{- fail (printf "config.sites[%d].password_file: the chart writes it from databasePasswords.existingSecret; name the Secret there" $index) -}}
{{- end -}}
{{- $site := deepCopy $entry -}}
{{- if $.Values.databasePasswords.existingSecret -}}
{{- $_ := set $site "password_file" (printf "/etc/actionscheduler-exporter/passwords/%s" $site.name) -}}
{{- end -}}
{{- if and $.Values.worker.enabled (eq $site.name $.Values.worker.site) -}}
{{- $_ := set $site "concurrent_batches_limit" $.Values.worker.concurrentBatches -}}
{{- /* The chart's workers run this queue: runs by web requests raise an alert. */ -}}
{{- if not (hasKey $site "dedicated_workers") -}}
{{- $_ := set $site "dedicated_workers" true -}}
{{- end -}}
{{- if eq $.Values.worker.kind "Deployment" -}}
{{- $contexts := dict "root" $ -}}
{{- $_ := include "ase.workerContexts" $contexts -}}
{{- $entries := list -}}
{{- range $contexts.contexts -}}
{{- $workers := dict "namespace" $.Release.Namespace "deployment" (include "ase.workerName" .) "container" "worker" -}}
{{- if include "ase.workerHPA" . -}}
{{- $_ := set $workers "horizontalpodautoscaler" (include "ase.workerHPA" .) -}}
{{- end -}}
{{- with .pool -}}
{{- $runs := list -}}
{{- with .group }}{{ $runs = append $runs (printf "group %s" .) }}{{ end -}}
{{- with .excludeGroups }}{{ $runs = append $runs (printf "all groups but %s" (join ", " .)) }}{{ end -}}
{{- with .hooks }}{{ $runs = append $runs (printf "hooks %s" (join ", " .)) }}{{ end -}}
{{- $_ := set $workers "runs" (join "; " $runs | default "everything") -}}
{{- end -}}
{{- $entries = append $entries $workers -}}
{{- end -}}
{{- $_ := set $site "workers" (ternary $entries (first $entries) (gt (len $entries) 1)) -}}
{{- end -}}
{{- with $.Values.worker.pools -}}
{{- /* The pools' groups and hooks always have series of their own: they scale on them. */ -}}
{{- $groups := deepCopy (default dict $site.groups) -}}
{{- $hooks := default list $site.hooks -}}
{{- range . -}}
{{- range (concat (compact (list (default "" .group))) (default list .excludeGroups)) -}}
{{- if not (hasKey $groups .) }}{{ $_ := set $groups . dict }}{{ end -}}
{{- end -}}
{{- range (default list .hooks) }}{{ if not (has . $hooks) }}{{ $hooks = append $hooks . }}{{ end }}{{ end -}}
{{- end -}}
{{- if $groups }}{{ $_ := set $site "groups" $groups }}{{ end -}}
{{- if $hooks }}{{ $_ := set $site "hooks" $hooks }}{{ end -}}
{{- end -}}
{{- if include "ase.kubernetesSource" $ -}}
{{- $selector := printf "app.kubernetes.io/name=%s,app.kubernetes.io/instance=%s,app.kubernetes.io/component=worker" (include "ase.name" $) $.Release.Name -}}
{{- $source := dict "namespace" $.Release.Namespace "selector" $selector "container" "worker" "cache" $.Values.kubernetesSource.cache -}}
{{- /* With pools, the source counts every pool's pods; each pool's replicas come from kube-state-metrics. */ -}}
{{- if not $.Values.worker.pools -}}
{{- $_ := set $source "deployment" (include "ase.workerName" $) -}}
{{- if include "ase.workerHPA" $ -}}
{{- $_ := set $source "horizontalpodautoscaler" (include "ase.workerHPA" $) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $site "kubernetes" $source -}}
{{- end -}}
{{- end -}}
{{- $sites = append $sites $site -}}
{{- end -}}
{{- $config := dict "sites" $sites -}}
{{- if .Values.config.defaults -}}
{{- $_ := set $config "defaults" .Values.config.defaults -}}
{{- end -}}
{{- with .Values.config.connectionsPerServer -}}
{{- $_ := set $config "connections_per_server" . -}}
{{- end -}}
{{- with .Values.config.processes -}}
{{- $_ := set $config "processes" . -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/*
Fails unless the value names a site of config.sites (or a subsite "name:prefix" of a
table_prefix: auto site): a KEDA query or worker for an unknown site would wait on a
series that never comes.
*/}}
{{- define "ase.requireSite" -}}
{{- $root := index . 0 -}}
{{- $key := index . 1 -}}
{{- $wanted := index . 2 -}}
{{- $known := list -}}
{{- $found := false -}}
{{- range $root.Values.config.sites -}}
{{- $name := default .database .name -}}
{{- $known = append $known $name -}}
{{- if eq $name $wanted -}}{{- $found = true -}}{{- end -}}
{{- if and (eq (default "" .table_prefix) "auto") (hasPrefix (printf "%s:" $name) $wanted) -}}{{- $found = true -}}{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "%s is %q, which is not a site of config.sites (%s): name one of them" $key $wanted (join ", " $known)) -}}
{{- end -}}
{{- end -}}

{{/* The exporter's ServiceAccount: the chart's (named after the release unless named), or
an existing one with serviceAccount.create false. */}}
{{- define "ase.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ase.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.create is false: name the existing account in serviceAccount.name" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}
