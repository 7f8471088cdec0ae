{{/*
Labels every object carries (the CRD under crds/ is a static file and carries none).
*/}}
{{- define "sandbox.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end -}}

{{- define "sandbox.apiserver.selectorLabels" -}}
app.kubernetes.io/name: sandbox-apiserver
{{- end -}}

{{- define "sandbox.apiserver.labels" -}}
{{ include "sandbox.commonLabels" . }}
{{ include "sandbox.apiserver.selectorLabels" . }}
app.kubernetes.io/component: aggregated-apiserver
{{- end -}}

{{- define "sandbox.envdProxy.selectorLabels" -}}
app.kubernetes.io/name: sandbox-envd-proxy
{{- end -}}

{{- define "sandbox.envdProxy.labels" -}}
{{ include "sandbox.commonLabels" . }}
{{ include "sandbox.envdProxy.selectorLabels" . }}
app.kubernetes.io/component: data-plane-proxy
{{- end -}}

{{/*
<repository>:<tag> of one image block; an empty tag fails the render (seed 003's message).
*/}}
{{- define "sandbox.image" -}}
{{- if eq (toString .tag) "" -}}
{{- fail "an image tag is required" -}}
{{- end -}}
{{- printf "%s:%s" .repository (toString .tag) -}}
{{- end -}}

{{/*
The values a rendered configuration cannot run without, checked before any object renders (chart.md §4).
*/}}
{{- define "sandbox.validate" -}}
{{- $e2b := .Values.apiserver.e2b -}}
{{- if $e2b.enabled -}}
{{- if not $e2b.apiKeySecret.name -}}
{{- fail "apiserver.e2b.apiKeySecret.name is required when apiserver.e2b.enabled is true" -}}
{{- end -}}
{{- if not $e2b.domain -}}
{{- fail "apiserver.e2b.domain is required when apiserver.e2b.enabled is true" -}}
{{- end -}}
{{- if and (not $e2b.envdSecret.value) (not $e2b.envdSecret.secretName) -}}
{{- fail "apiserver.e2b.envdSecret.value or apiserver.e2b.envdSecret.secretName is required when apiserver.e2b.enabled is true" -}}
{{- end -}}
{{- if not .Values.apiserver.sandboxdToken.secretName -}}
{{- fail "apiserver.sandboxdToken.secretName is required when apiserver.e2b.enabled is true: the envd proxy reads claim tokens with it" -}}
{{- end -}}
{{- include "sandbox.validateBuilds" . -}}
{{- end -}}
{{- if and (not .Values.certManager.enabled) (not .Values.certManager.caBundle) -}}
{{- fail "certManager.caBundle is required when certManager.enabled is false" -}}
{{- end -}}
{{- end -}}

{{/*
The Secret holding the envd secret: the one the chart renders from envdSecret.value, else envdSecret.secretName.
*/}}
{{- define "sandbox.envdSecretName" -}}
{{- if .Values.apiserver.e2b.envdSecret.value -}}
sandbox-e2b-envd-secret
{{- else -}}
{{- .Values.apiserver.e2b.envdSecret.secretName -}}
{{- end -}}
{{- end -}}

{{/*
The proxy's --domain: its own value, else the e2b surface's; empty when both are.
*/}}
{{- define "sandbox.envdProxy.domain" -}}
{{- default .Values.apiserver.e2b.domain .Values.envdProxy.domain -}}
{{- end -}}

{{/*
Pod and container hardening shared by both Deployments. UID/GID 65532 is the images' non-root user
(USER 65532:65532 in every images/<binary>/Dockerfile).
*/}}
{{- define "sandbox.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "sandbox.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "sandbox.spread" -}}
{{- /* Honor taints: vk-sandbox's virtual nodes are tainted Nodes; counted as empty hostnames (the default, Ignore),
they made every replica past the first unschedulable (seen on a real kubelet with two vk-sandbox nodes). */ -}}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: DoNotSchedule
  nodeTaintsPolicy: Honor
  labelSelector:
    matchLabels:
      {{- . | nindent 6 }}
{{- end -}}

{{/*
Pod placement and pulling, from a component's values (apiserver or envdProxy) and the shared imagePullSecrets.
Called with (dict "v" <component values> "root" $).
*/}}
{{- define "sandbox.podPlacement" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The build upload stores (e2b.md §6.3): one at most, as the binary refuses both at startup; a directory every
replica sees; S3 keys only with a bucket. Checked only when builds render.
*/}}
{{- define "sandbox.validateBuilds" -}}
{{- $b := .Values.apiserver.e2b.builds -}}
{{- if $b.enabled -}}
{{- if and $b.dir.enabled $b.s3.bucket -}}
{{- fail "apiserver.e2b.builds.dir.enabled and apiserver.e2b.builds.s3.bucket are exclusive: choose one upload store" -}}
{{- end -}}
{{- if and $b.dir.enabled (not $b.dir.existingClaim) (gt (int .Values.apiserver.replicaCount) 1) -}}
{{- fail "apiserver.e2b.builds.dir without existingClaim is an emptyDir, which only works with apiserver.replicaCount 1: every replica must see the same directory (set apiserver.e2b.builds.dir.existingClaim to a ReadWriteMany claim)" -}}
{{- end -}}
{{- if and $b.s3.credentialsSecret.name (not $b.s3.bucket) -}}
{{- fail "apiserver.e2b.builds.s3.credentialsSecret.name needs apiserver.e2b.builds.s3.bucket" -}}
{{- end -}}
{{- end -}}
{{- end -}}
