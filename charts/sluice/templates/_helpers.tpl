{{/* Name of the release's objects: the release name, with "-sluice" unless it holds "sluice". */}}
{{- define "sluice.fullname" -}}
{{- if contains "sluice" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-sluice" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: sluice
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of a component: "sluice" or "envoy". */}}
{{- define "sluice.selector" -}}
app.kubernetes.io/name: sluice
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sluice.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The webhook Service's DNS name, the name its serving certificate holds. */}}
{{- define "sluice.webhookHost" -}}
{{ include "sluice.fullname" . }}-webhook.{{ .Release.Namespace }}.svc
{{- end -}}

{{/* The xDS Service's DNS name, the name its serving certificate holds. */}}
{{- define "sluice.xdsHost" -}}
{{ include "sluice.fullname" . }}.{{ .Release.Namespace }}.svc
{{- end -}}

{{/*
Certificates the chart generates: a CA and a certificate signed by it, in a kubernetes.io/tls
Secret with ca.crt. An existing Secret of that name (an install before this upgrade) is kept,
so an upgrade changes neither the certificate the pods serve nor the CA that trusts it.
Arguments: root (the chart's context), name (the Secret), cn (the CA's name), hosts (the
certificate's DNS names). Returns the Secret's data as YAML.
*/}}
{{- define "sluice.tlsSecretData" -}}
{{- $old := lookup "v1" "Secret" .root.Release.Namespace .name -}}
{{- if and $old (hasKey $old "data") (hasKey $old.data "ca.crt") (hasKey $old.data "tls.crt") (hasKey $old.data "tls.key") -}}
ca.crt: {{ index $old.data "ca.crt" }}
tls.crt: {{ index $old.data "tls.crt" }}
tls.key: {{ index $old.data "tls.key" }}
{{- else -}}
{{- $ca := genCA .cn 3650 -}}
{{- $cert := genSignedCert (first .hosts) nil .hosts 3650 $ca -}}
ca.crt: {{ $ca.Cert | b64enc }}
tls.crt: {{ $cert.Cert | b64enc }}
tls.key: {{ $cert.Key | b64enc }}
{{- end -}}
{{- end -}}

{{/* Parts of every webhook in templates/webhook.yaml. */}}
{{- define "sluice.webhookCommon" }}
    admissionReviewVersions: ["v1"]
    sideEffects: None
    matchPolicy: Equivalent
    namespaceSelector:
      matchExpressions:
        - key: kubernetes.io/metadata.name
          operator: NotIn
          values: {{ toJson .skip }}
{{- end }}
{{- define "sluice.clientConfig" }}
    clientConfig:
      service:
        namespace: {{ .root.Release.Namespace }}
        name: {{ include "sluice.fullname" .root }}-webhook
        path: {{ .path }}
        port: 443
      {{- with .caBundle }}
      caBundle: {{ . }}
      {{- end }}
{{- end }}
{{- define "sluice.specOrAnnotationsChange" }}
      - name: spec-or-annotations-change
        expression: >-
          request.operation != 'UPDATE' ||
          (has(object.spec) ? object.spec : {}) != (has(oldObject.spec) ? oldObject.spec : {}) ||
          (has(object.metadata.annotations) ? object.metadata.annotations : {}) !=
          (has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {})
{{- end }}

{{/*
The component whose Pods serve the admission webhook: "webhook" (the Deployment of
templates/webhook-deployment.yaml) with webhook.separateDeployment, else "sluice".
*/}}
{{- define "sluice.webhookComponent" -}}
{{- if .Values.webhook.separateDeployment -}}webhook{{- else -}}sluice{{- end -}}
{{- end -}}
