{{/*
The chart's name, and the objects' name: <release>-limiterd, or the release
name alone when it already contains the chart's name. 63 characters at most
(a DNS label); "-peers" and "-gossip" are added to it, so 56 for the base.
*/}}
{{- define "limiterd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 56 | trimSuffix "-" }}
{{- end }}

{{- define "limiterd.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 56 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 56 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 56 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The headless Service every pod joins through (-join). */}}
{{- define "limiterd.peersName" -}}
{{- printf "%s-peers" (include "limiterd.fullname" .) }}
{{- end }}

{{/* The Secret holding the gossip key file: yours, or the chart's. */}}
{{- define "limiterd.gossipSecretName" -}}
{{- default (printf "%s-gossip" (include "limiterd.fullname" .)) .Values.gossip.existingSecret }}
{{- end }}

{{- define "limiterd.rulesName" -}}
{{- printf "%s-rules" (include "limiterd.fullname" .) }}
{{- end }}

{{- define "limiterd.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "limiterd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "limiterd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "limiterd.labels" -}}
{{ include "limiterd.selectorLabels" . }}
app.kubernetes.io/version: {{ (default .Chart.AppVersion .Values.image.tag) | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The rule files, limiterd's and envoyproxy/ratelimit's, in one map (the
ConfigMap's data). A name in both would be one file: refused.
*/}}
{{- define "limiterd.ruleFiles" -}}
{{- $rules := .Values.rules | default dict }}
{{- $envoy := .Values.envoyRules | default dict }}
{{- range $name, $_ := $envoy }}
{{- if hasKey $rules $name }}
{{- fail (printf "rule file %q is in both rules and envoyRules" $name) }}
{{- end }}
{{- end }}
{{- $files := merge (dict) $rules $envoy }}
{{- if not $files }}
{{- fail "rules and envoyRules are both empty: limiterd needs at least one rule file" }}
{{- end }}
{{- toYaml $files }}
{{- end }}
