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

{{- define "ase.workerName" -}}
{{- printf "%s-worker" (include "ase.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ase.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "ase.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
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
{{- printf "max(sum by (job, instance) (actionscheduler_due_actions{%s}) + sum by (job, instance) (actionscheduler_in_progress_actions{%s}))" $selector $selector -}}
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
{{- range .Values.config.sites -}}
{{- $site := deepCopy . -}}
{{- if $.Values.databasePasswords.existingSecret -}}
{{- $_ := set $site "password_file" (printf "/etc/actionscheduler-exporter/passwords/%s" $site.name) -}}
{{- end -}}
{{- if and $.Values.worker.enabled (eq $site.name $.Values.worker.site) -}}
{{- $_ := set $site "concurrent_batches_limit" $.Values.worker.concurrentBatches -}}
{{- if eq $.Values.worker.kind "Deployment" -}}
{{- $workers := dict "namespace" $.Release.Namespace "deployment" (include "ase.workerName" $) "container" "worker" -}}
{{- if include "ase.workerHPA" $ -}}
{{- $_ := set $workers "horizontalpodautoscaler" (include "ase.workerHPA" $) -}}
{{- end -}}
{{- $_ := set $site "workers" $workers -}}
{{- end -}}
{{- if include "ase.kubernetesSource" $ -}}
{{- $selector := printf "app.kubernetes.io/name=%s,app.kubernetes.io/instance=%s,app.kubernetes.io/component=worker" (include "ase.name" $) $.Release.Name -}}
{{- $source := dict "namespace" $.Release.Namespace "selector" $selector "container" "worker" "deployment" (include "ase.workerName" $) "cache" $.Values.kubernetesSource.cache -}}
{{- if include "ase.workerHPA" $ -}}
{{- $_ := set $source "horizontalpodautoscaler" (include "ase.workerHPA" $) -}}
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
