{{- define "secondary-scheduler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "secondary-scheduler.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "secondary-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "secondary-scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "secondary-scheduler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "secondary-scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: scheduler
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "secondary-scheduler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "secondary-scheduler.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "secondary-scheduler.leaseName" -}}
{{- $name := default (include "secondary-scheduler.fullname" .) .Values.leaderElection.resourceName }}
{{- if eq $name "kube-scheduler" }}
{{- fail "leaderElection.resourceName must not be kube-scheduler: that Lease is kube-scheduler's own" }}
{{- end }}
{{- $name }}
{{- end }}

{{- define "secondary-scheduler.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.resourceNamespace }}
{{- end }}

{{- define "secondary-scheduler.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "secondary-scheduler.scheme" -}}
{{- if .Values.serving.plainHTTP }}HTTP{{ else }}HTTPS{{ end }}
{{- end }}

{{/* The KubeSchedulerConfiguration: the config values plus leaderElection from the values. */}}
{{- define "secondary-scheduler.config" -}}
{{- $config := deepCopy .Values.config }}
{{- if not $config.profiles }}
{{- $_ := set $config "profiles" (list (dict "schedulerName" .Values.schedulerName)) }}
{{- end }}
{{- $le := dict "leaderElect" .Values.leaderElection.enabled "resourceLock" "leases" "resourceName" (include "secondary-scheduler.leaseName" .) "resourceNamespace" (include "secondary-scheduler.leaseNamespace" .) "leaseDuration" (printf "%ds" (int .Values.leaderElection.leaseDuration)) "renewDeadline" (printf "%ds" (int .Values.leaderElection.renewDeadline)) "retryPeriod" (printf "%ds" (int .Values.leaderElection.retryPeriod)) }}
{{- $doc := merge (dict "apiVersion" "kubescheduler.config.k8s.io/v1" "kind" "KubeSchedulerConfiguration" "leaderElection" $le) $config }}
{{- toYaml $doc }}
{{- end }}
