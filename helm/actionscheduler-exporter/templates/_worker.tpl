{{/* The worker pod, shared by the Deployment and the CronJob forms. */}}
{{- define "ase.workerPod" -}}
metadata:
  labels:
    {{- include "ase.workerSelectorLabels" . | nindent 4 }}
  annotations:
    checksum/loop: {{ .Files.Get "files/worker/as-worker-loop.sh" | sha256sum }}
    {{- with .Values.worker.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- with .Values.worker.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.worker.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.worker.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.worker.serviceAccountName }}
  # An account of the store's own (IRSA, workload identity) for actions that call cloud APIs.
  serviceAccountName: {{ . }}
  automountServiceAccountToken: true
  {{- else }}
  automountServiceAccountToken: false
  {{- end }}
  terminationGracePeriodSeconds: {{ include "ase.workerGracePeriod" . }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: {{ .Values.worker.runAsUser }}
    runAsGroup: {{ .Values.worker.runAsUser }}
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: worker
      image: {{ printf "%s:%s" .Values.worker.image.repository .Values.worker.image.tag }}
      imagePullPolicy: {{ .Values.worker.image.pullPolicy }}
      command: ["/bin/sh", "/opt/as-worker/as-worker-loop.sh"]
      {{- with .Values.worker.extraArgs }}
      # Passed on to `wp action-scheduler run`.
      args:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      env:
        # WP-CLI keeps its cache and packages under HOME; the root filesystem is read-only.
        - name: HOME
          value: /tmp
        - name: WP_PATH
          value: {{ .Values.worker.wordpressPath | quote }}
        - name: AS_BATCH_SIZE
          value: {{ .Values.worker.batchSize | quote }}
        - name: AS_IDLE_SLEEP
          value: {{ .Values.worker.idleSleepSeconds | quote }}
        - name: AS_MAX_FAILURES
          value: {{ .Values.worker.maxFailures | quote }}
        - name: AS_CONCURRENT_BATCHES
          value: {{ .Values.worker.concurrentBatches | quote }}
        - name: AS_MAX_BATCHES
          value: {{ ternary .Values.worker.cronBatches 0 (eq .Values.worker.kind "CronJob") | quote }}
        {{- with .Values.worker.env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.worker.envFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if eq .Values.worker.kind "Deployment" }}
      livenessProbe:
        # The loop touches its heartbeat before every batch: older than a whole batch can
        # take means it hangs.
        exec:
          command:
            - /bin/sh
            - -c
            - test -n "$(find /tmp/as-worker-heartbeat -mmin -{{ add (div (mul .Values.worker.batchSize .Values.worker.longestActionSeconds) 60) 2 }})"
        initialDelaySeconds: 60
        periodSeconds: 60
        failureThreshold: 2
      {{- end }}
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        runAsNonRoot: true
        capabilities:
          drop: [ALL]
      resources:
        {{- toYaml .Values.worker.resources | nindent 8 }}
      volumeMounts:
        - name: loop
          mountPath: /opt/as-worker
          readOnly: true
        - name: tmp
          mountPath: /tmp
        {{- with .Values.worker.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: loop
      configMap:
        name: {{ include "ase.workerBaseName" . }}
    - name: tmp
      emptyDir:
        sizeLimit: 256Mi
    {{- with .Values.worker.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

