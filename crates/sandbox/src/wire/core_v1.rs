//! core/v1 messages (`k8s.io/api/core/v1/generated.proto`).

use super::model::Ty::{Bool, Bytes, I32, I64, IntOrString, Quantity, Str};

use super::meta_v1::{CONDITION, LABEL_SELECTOR, OBJECT_META};
use super::model::{Message, inline, m, map, msg, opt, ptr, rep, rep_null, req, time};

pub(super) static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &NAMESPACE_SPEC),
        msg(3, "status", &NAMESPACE_STATUS),
    ],
};

static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[rep(1, "finalizers", Str)],
};

static NAMESPACE_STATUS: Message = Message {
    name: "NamespaceStatus",
    fields: &[
        opt(1, "phase", Str),
        rep(2, "conditions", m(&NAMESPACE_CONDITION)),
    ],
};

static NAMESPACE_CONDITION: Message = Message {
    name: "NamespaceCondition",
    fields: &[
        req(1, "type", Str),
        req(2, "status", Str),
        time(4, "lastTransitionTime"),
        opt(5, "reason", Str),
        opt(6, "message", Str),
    ],
};

pub(super) static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        ptr(4, "immutable", Bool),
        map(2, "data", Str),
        map(3, "binaryData", Bytes),
    ],
};

pub(super) static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        ptr(5, "immutable", Bool),
        map(2, "data", Bytes),
        map(4, "stringData", Str),
        opt(3, "type", Str),
    ],
};

pub(super) static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        rep(2, "secrets", m(&OBJECT_REFERENCE)),
        rep(3, "imagePullSecrets", m(&LOCAL_OBJECT_REFERENCE)),
        ptr(4, "automountServiceAccountToken", Bool),
    ],
};

pub(super) static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        opt(1, "kind", Str),
        opt(2, "namespace", Str),
        opt(3, "name", Str),
        opt(4, "uid", Str),
        opt(5, "apiVersion", Str),
        opt(6, "resourceVersion", Str),
        opt(7, "fieldPath", Str),
    ],
};

static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "LocalObjectReference",
    fields: &[opt(1, "name", Str)],
};

pub(super) static SERVICE: Message = Message {
    name: "Service",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &SERVICE_SPEC),
        msg(3, "status", &SERVICE_STATUS),
    ],
};

static SERVICE_SPEC: Message = Message {
    name: "ServiceSpec",
    fields: &[
        rep(1, "ports", m(&SERVICE_PORT)),
        map(2, "selector", Str),
        opt(3, "clusterIP", Str),
        rep(18, "clusterIPs", Str),
        opt(4, "type", Str),
        rep(5, "externalIPs", Str),
        opt(7, "sessionAffinity", Str),
        opt(8, "loadBalancerIP", Str),
        rep(9, "loadBalancerSourceRanges", Str),
        opt(10, "externalName", Str),
        opt(11, "externalTrafficPolicy", Str),
        opt(12, "healthCheckNodePort", I32),
        opt(13, "publishNotReadyAddresses", Bool),
        msg(14, "sessionAffinityConfig", &SESSION_AFFINITY_CONFIG),
        rep(19, "ipFamilies", Str),
        ptr(17, "ipFamilyPolicy", Str),
        ptr(20, "allocateLoadBalancerNodePorts", Bool),
        ptr(21, "loadBalancerClass", Str),
        ptr(22, "internalTrafficPolicy", Str),
        ptr(23, "trafficDistribution", Str),
    ],
};

static SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        opt(1, "name", Str),
        opt(2, "protocol", Str),
        ptr(6, "appProtocol", Str),
        req(3, "port", I32),
        // A non-pointer struct: always written and always emitted (0 when unset).
        req(4, "targetPort", IntOrString),
        opt(5, "nodePort", I32),
    ],
};

static SESSION_AFFINITY_CONFIG: Message = Message {
    name: "SessionAffinityConfig",
    fields: &[msg(1, "clientIP", &CLIENT_IP_CONFIG)],
};

static CLIENT_IP_CONFIG: Message = Message {
    name: "ClientIPConfig",
    fields: &[ptr(1, "timeoutSeconds", I32)],
};

static SERVICE_STATUS: Message = Message {
    name: "ServiceStatus",
    fields: &[
        msg(1, "loadBalancer", &LOAD_BALANCER_STATUS),
        rep(2, "conditions", m(&CONDITION)),
    ],
};

static LOAD_BALANCER_STATUS: Message = Message {
    name: "LoadBalancerStatus",
    fields: &[rep(1, "ingress", m(&LOAD_BALANCER_INGRESS))],
};

static LOAD_BALANCER_INGRESS: Message = Message {
    name: "LoadBalancerIngress",
    fields: &[
        opt(1, "ip", Str),
        opt(2, "hostname", Str),
        ptr(3, "ipMode", Str),
        rep(4, "ports", m(&PORT_STATUS)),
    ],
};

static PORT_STATUS: Message = Message {
    name: "PortStatus",
    fields: &[
        req(1, "port", I32),
        req(2, "protocol", Str),
        ptr(3, "error", Str),
    ],
};

pub(super) static POD: Message = Message {
    name: "Pod",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &POD_SPEC),
        msg(3, "status", &POD_STATUS),
    ],
};

pub(super) static POD_TEMPLATE_SPEC: Message = Message {
    name: "PodTemplateSpec",
    fields: &[msg(1, "metadata", &OBJECT_META), msg(2, "spec", &POD_SPEC)],
};

/// Unsupported (error if present): ephemeralContainers (34), workloadRef (42).
static POD_SPEC: Message = Message {
    name: "PodSpec",
    fields: &[
        rep(1, "volumes", m(&VOLUME)),
        rep(20, "initContainers", m(&CONTAINER)),
        rep_null(2, "containers", m(&CONTAINER)),
        opt(3, "restartPolicy", Str),
        ptr(4, "terminationGracePeriodSeconds", I64),
        ptr(5, "activeDeadlineSeconds", I64),
        opt(6, "dnsPolicy", Str),
        map(7, "nodeSelector", Str),
        opt(8, "serviceAccountName", Str),
        opt(9, "serviceAccount", Str),
        ptr(21, "automountServiceAccountToken", Bool),
        opt(10, "nodeName", Str),
        opt(11, "hostNetwork", Bool),
        opt(12, "hostPID", Bool),
        opt(13, "hostIPC", Bool),
        ptr(27, "shareProcessNamespace", Bool),
        msg(14, "securityContext", &POD_SECURITY_CONTEXT),
        rep(15, "imagePullSecrets", m(&LOCAL_OBJECT_REFERENCE)),
        opt(16, "hostname", Str),
        opt(17, "subdomain", Str),
        msg(18, "affinity", &AFFINITY),
        opt(19, "schedulerName", Str),
        rep(22, "tolerations", m(&TOLERATION)),
        rep(23, "hostAliases", m(&HOST_ALIAS)),
        msg(26, "dnsConfig", &POD_DNS_CONFIG),
        rep(
            33,
            "topologySpreadConstraints",
            m(&TOPOLOGY_SPREAD_CONSTRAINT),
        ),
        opt(24, "priorityClassName", Str),
        ptr(25, "priority", I32),
        rep(28, "readinessGates", m(&POD_READINESS_GATE)),
        ptr(29, "runtimeClassName", Str),
        ptr(30, "enableServiceLinks", Bool),
        ptr(31, "preemptionPolicy", Str),
        map(32, "overhead", Quantity),
        ptr(35, "setHostnameAsFQDN", Bool),
        msg(36, "os", &POD_OS),
        ptr(37, "hostUsers", Bool),
        rep(38, "schedulingGates", m(&POD_SCHEDULING_GATE)),
        rep(39, "resourceClaims", m(&POD_RESOURCE_CLAIM)),
        msg(40, "resources", &RESOURCE_REQUIREMENTS),
        ptr(41, "hostnameOverride", Str),
    ],
};

/// Unsupported (error if present): windowsOptions (8).
static POD_SECURITY_CONTEXT: Message = Message {
    name: "PodSecurityContext",
    fields: &[
        msg(1, "seLinuxOptions", &SELINUX_OPTIONS),
        ptr(2, "runAsUser", I64),
        ptr(6, "runAsGroup", I64),
        ptr(3, "runAsNonRoot", Bool),
        rep(4, "supplementalGroups", I64),
        ptr(12, "supplementalGroupsPolicy", Str),
        ptr(5, "fsGroup", I64),
        rep(7, "sysctls", m(&SYSCTL)),
        ptr(9, "fsGroupChangePolicy", Str),
        msg(10, "seccompProfile", &SECCOMP_PROFILE),
        msg(11, "appArmorProfile", &APP_ARMOR_PROFILE),
        ptr(13, "seLinuxChangePolicy", Str),
    ],
};

static SELINUX_OPTIONS: Message = Message {
    name: "SELinuxOptions",
    fields: &[
        opt(1, "user", Str),
        opt(2, "role", Str),
        opt(3, "type", Str),
        opt(4, "level", Str),
    ],
};

static SYSCTL: Message = Message {
    name: "Sysctl",
    fields: &[req(1, "name", Str), req(2, "value", Str)],
};

static SECCOMP_PROFILE: Message = Message {
    name: "SeccompProfile",
    fields: &[req(1, "type", Str), ptr(2, "localhostProfile", Str)],
};

static APP_ARMOR_PROFILE: Message = Message {
    name: "AppArmorProfile",
    fields: &[req(1, "type", Str), ptr(2, "localhostProfile", Str)],
};

static TOLERATION: Message = Message {
    name: "Toleration",
    fields: &[
        opt(1, "key", Str),
        opt(2, "operator", Str),
        opt(3, "value", Str),
        opt(4, "effect", Str),
        ptr(5, "tolerationSeconds", I64),
    ],
};

static POD_READINESS_GATE: Message = Message {
    name: "PodReadinessGate",
    fields: &[req(1, "conditionType", Str)],
};

static POD_SCHEDULING_GATE: Message = Message {
    name: "PodSchedulingGate",
    fields: &[req(1, "name", Str)],
};

static POD_OS: Message = Message {
    name: "PodOS",
    fields: &[req(1, "name", Str)],
};

static POD_RESOURCE_CLAIM: Message = Message {
    name: "PodResourceClaim",
    fields: &[
        req(1, "name", Str),
        ptr(3, "resourceClaimName", Str),
        ptr(4, "resourceClaimTemplateName", Str),
    ],
};

/// Only the scalar fields a client-built status carries; the lists are controller-populated.
static POD_STATUS: Message = Message {
    name: "PodStatus",
    fields: &[
        opt(17, "observedGeneration", I64),
        opt(1, "phase", Str),
        opt(3, "message", Str),
        opt(4, "reason", Str),
        opt(11, "nominatedNodeName", Str),
        opt(5, "hostIP", Str),
        opt(6, "podIP", Str),
        time(7, "startTime"),
        opt(9, "qosClass", Str),
        opt(14, "resize", Str),
    ],
};

/// Unsupported (error if present): restartPolicyRules (25).
static CONTAINER: Message = Message {
    name: "Container",
    fields: &[
        req(1, "name", Str),
        opt(2, "image", Str),
        rep(3, "command", Str),
        rep(4, "args", Str),
        opt(5, "workingDir", Str),
        rep(6, "ports", m(&CONTAINER_PORT)),
        rep(19, "envFrom", m(&ENV_FROM_SOURCE)),
        rep(7, "env", m(&ENV_VAR)),
        // A non-pointer struct, so Go always emits it (`"resources": {}`).
        msg(8, "resources", &RESOURCE_REQUIREMENTS),
        rep(23, "resizePolicy", m(&CONTAINER_RESIZE_POLICY)),
        ptr(24, "restartPolicy", Str),
        rep(9, "volumeMounts", m(&VOLUME_MOUNT)),
        rep(21, "volumeDevices", m(&VOLUME_DEVICE)),
        msg(10, "livenessProbe", &PROBE),
        msg(11, "readinessProbe", &PROBE),
        msg(22, "startupProbe", &PROBE),
        msg(12, "lifecycle", &LIFECYCLE),
        opt(13, "terminationMessagePath", Str),
        opt(20, "terminationMessagePolicy", Str),
        opt(14, "imagePullPolicy", Str),
        msg(15, "securityContext", &SECURITY_CONTEXT),
        opt(16, "stdin", Bool),
        opt(17, "stdinOnce", Bool),
        opt(18, "tty", Bool),
    ],
};

static CONTAINER_PORT: Message = Message {
    name: "ContainerPort",
    fields: &[
        opt(1, "name", Str),
        opt(2, "hostPort", I32),
        req(3, "containerPort", I32),
        opt(4, "protocol", Str),
        opt(5, "hostIP", Str),
    ],
};

static CONTAINER_RESIZE_POLICY: Message = Message {
    name: "ContainerResizePolicy",
    fields: &[req(1, "resourceName", Str), req(2, "restartPolicy", Str)],
};

static ENV_VAR: Message = Message {
    name: "EnvVar",
    fields: &[
        req(1, "name", Str),
        opt(2, "value", Str),
        msg(3, "valueFrom", &ENV_VAR_SOURCE),
    ],
};

/// Unsupported (error if present): fileKeyRef (5).
static ENV_VAR_SOURCE: Message = Message {
    name: "EnvVarSource",
    fields: &[
        msg(1, "fieldRef", &OBJECT_FIELD_SELECTOR),
        msg(2, "resourceFieldRef", &RESOURCE_FIELD_SELECTOR),
        msg(3, "configMapKeyRef", &CONFIG_MAP_KEY_SELECTOR),
        msg(4, "secretKeyRef", &SECRET_KEY_SELECTOR),
    ],
};

static OBJECT_FIELD_SELECTOR: Message = Message {
    name: "ObjectFieldSelector",
    fields: &[opt(1, "apiVersion", Str), req(2, "fieldPath", Str)],
};

static RESOURCE_FIELD_SELECTOR: Message = Message {
    name: "ResourceFieldSelector",
    fields: &[
        opt(1, "containerName", Str),
        req(2, "resource", Str),
        req(3, "divisor", Quantity),
    ],
};

static CONFIG_MAP_KEY_SELECTOR: Message = Message {
    name: "ConfigMapKeySelector",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        req(2, "key", Str),
        ptr(3, "optional", Bool),
    ],
};

static SECRET_KEY_SELECTOR: Message = Message {
    name: "SecretKeySelector",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        req(2, "key", Str),
        ptr(3, "optional", Bool),
    ],
};

static ENV_FROM_SOURCE: Message = Message {
    name: "EnvFromSource",
    fields: &[
        opt(1, "prefix", Str),
        msg(2, "configMapRef", &CONFIG_MAP_ENV_SOURCE),
        msg(3, "secretRef", &SECRET_ENV_SOURCE),
    ],
};

static CONFIG_MAP_ENV_SOURCE: Message = Message {
    name: "ConfigMapEnvSource",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        ptr(2, "optional", Bool),
    ],
};

static SECRET_ENV_SOURCE: Message = Message {
    name: "SecretEnvSource",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        ptr(2, "optional", Bool),
    ],
};

static RESOURCE_REQUIREMENTS: Message = Message {
    name: "ResourceRequirements",
    fields: &[
        map(1, "limits", Quantity),
        map(2, "requests", Quantity),
        rep(3, "claims", m(&RESOURCE_CLAIM)),
    ],
};

static RESOURCE_CLAIM: Message = Message {
    name: "ResourceClaim",
    fields: &[req(1, "name", Str), opt(2, "request", Str)],
};

static VOLUME_MOUNT: Message = Message {
    name: "VolumeMount",
    fields: &[
        req(1, "name", Str),
        opt(2, "readOnly", Bool),
        ptr(7, "recursiveReadOnly", Str),
        req(3, "mountPath", Str),
        opt(4, "subPath", Str),
        ptr(5, "mountPropagation", Str),
        opt(6, "subPathExpr", Str),
    ],
};

/// Unsupported (error if present): windowsOptions (10), ulimits (13).
static SECURITY_CONTEXT: Message = Message {
    name: "SecurityContext",
    fields: &[
        msg(1, "capabilities", &CAPABILITIES),
        ptr(2, "privileged", Bool),
        msg(3, "seLinuxOptions", &SELINUX_OPTIONS),
        ptr(4, "runAsUser", I64),
        ptr(8, "runAsGroup", I64),
        ptr(5, "runAsNonRoot", Bool),
        ptr(6, "readOnlyRootFilesystem", Bool),
        ptr(7, "allowPrivilegeEscalation", Bool),
        ptr(9, "procMount", Str),
        msg(11, "seccompProfile", &SECCOMP_PROFILE),
        msg(12, "appArmorProfile", &APP_ARMOR_PROFILE),
    ],
};

static CAPABILITIES: Message = Message {
    name: "Capabilities",
    fields: &[rep(1, "add", Str), rep(2, "drop", Str)],
};

static VOLUME_DEVICE: Message = Message {
    name: "VolumeDevice",
    fields: &[req(1, "name", Str), req(2, "devicePath", Str)],
};

static PROBE: Message = Message {
    name: "Probe",
    fields: &[
        inline(1, "handler", &PROBE_HANDLER),
        opt(2, "initialDelaySeconds", I32),
        opt(3, "timeoutSeconds", I32),
        opt(4, "periodSeconds", I32),
        opt(5, "successThreshold", I32),
        opt(6, "failureThreshold", I32),
        ptr(7, "terminationGracePeriodSeconds", I64),
    ],
};

static PROBE_HANDLER: Message = Message {
    name: "ProbeHandler",
    fields: &[
        msg(1, "exec", &EXEC_ACTION),
        msg(2, "httpGet", &HTTP_GET_ACTION),
        msg(3, "tcpSocket", &TCP_SOCKET_ACTION),
        msg(4, "grpc", &GRPC_ACTION),
    ],
};

static EXEC_ACTION: Message = Message {
    name: "ExecAction",
    fields: &[rep(1, "command", Str)],
};

static HTTP_GET_ACTION: Message = Message {
    name: "HTTPGetAction",
    fields: &[
        opt(1, "path", Str),
        req(2, "port", IntOrString),
        opt(3, "host", Str),
        opt(4, "scheme", Str),
        rep(5, "httpHeaders", m(&HTTP_HEADER)),
    ],
};

static HTTP_HEADER: Message = Message {
    name: "HTTPHeader",
    fields: &[req(1, "name", Str), req(2, "value", Str)],
};

static TCP_SOCKET_ACTION: Message = Message {
    name: "TCPSocketAction",
    fields: &[req(1, "port", IntOrString), opt(2, "host", Str)],
};

static GRPC_ACTION: Message = Message {
    name: "GRPCAction",
    fields: &[req(1, "port", I32), ptr(2, "service", Str)],
};

static LIFECYCLE: Message = Message {
    name: "Lifecycle",
    fields: &[
        msg(1, "postStart", &LIFECYCLE_HANDLER),
        msg(2, "preStop", &LIFECYCLE_HANDLER),
        ptr(3, "stopSignal", Str),
    ],
};

static LIFECYCLE_HANDLER: Message = Message {
    name: "LifecycleHandler",
    fields: &[
        msg(1, "exec", &EXEC_ACTION),
        msg(2, "httpGet", &HTTP_GET_ACTION),
        msg(3, "tcpSocket", &TCP_SOCKET_ACTION),
        msg(4, "sleep", &SLEEP_ACTION),
    ],
};

static SLEEP_ACTION: Message = Message {
    name: "SleepAction",
    fields: &[req(1, "seconds", I64)],
};

static VOLUME: Message = Message {
    name: "Volume",
    fields: &[
        req(1, "name", Str),
        inline(2, "volumeSource", &VOLUME_SOURCE),
    ],
};

/// The volume sources pods commonly use; the cloud- and vendor-specific ones (gcePersistentDisk,
/// awsElasticBlockStore, gitRepo, iscsi, rbd, ... and ephemeral, image) are unsupported (error if
/// present).
static VOLUME_SOURCE: Message = Message {
    name: "VolumeSource",
    fields: &[
        msg(1, "hostPath", &HOST_PATH_VOLUME_SOURCE),
        msg(2, "emptyDir", &EMPTY_DIR_VOLUME_SOURCE),
        msg(6, "secret", &SECRET_VOLUME_SOURCE),
        msg(7, "nfs", &NFS_VOLUME_SOURCE),
        msg(10, "persistentVolumeClaim", &PVC_VOLUME_SOURCE),
        msg(16, "downwardAPI", &DOWNWARD_API_VOLUME_SOURCE),
        msg(19, "configMap", &CONFIG_MAP_VOLUME_SOURCE),
        msg(26, "projected", &PROJECTED_VOLUME_SOURCE),
        msg(28, "csi", &CSI_VOLUME_SOURCE),
    ],
};

static HOST_PATH_VOLUME_SOURCE: Message = Message {
    name: "HostPathVolumeSource",
    fields: &[req(1, "path", Str), ptr(2, "type", Str)],
};

static EMPTY_DIR_VOLUME_SOURCE: Message = Message {
    name: "EmptyDirVolumeSource",
    fields: &[opt(1, "medium", Str), ptr(2, "sizeLimit", Quantity)],
};

static SECRET_VOLUME_SOURCE: Message = Message {
    name: "SecretVolumeSource",
    fields: &[
        opt(1, "secretName", Str),
        rep(2, "items", m(&KEY_TO_PATH)),
        ptr(3, "defaultMode", I32),
        ptr(4, "optional", Bool),
    ],
};

static KEY_TO_PATH: Message = Message {
    name: "KeyToPath",
    fields: &[req(1, "key", Str), req(2, "path", Str), ptr(3, "mode", I32)],
};

static NFS_VOLUME_SOURCE: Message = Message {
    name: "NFSVolumeSource",
    fields: &[
        req(1, "server", Str),
        req(2, "path", Str),
        opt(3, "readOnly", Bool),
    ],
};

static PVC_VOLUME_SOURCE: Message = Message {
    name: "PersistentVolumeClaimVolumeSource",
    fields: &[req(1, "claimName", Str), opt(2, "readOnly", Bool)],
};

static DOWNWARD_API_VOLUME_SOURCE: Message = Message {
    name: "DownwardAPIVolumeSource",
    fields: &[
        rep(1, "items", m(&DOWNWARD_API_VOLUME_FILE)),
        ptr(2, "defaultMode", I32),
    ],
};

static DOWNWARD_API_VOLUME_FILE: Message = Message {
    name: "DownwardAPIVolumeFile",
    fields: &[
        req(1, "path", Str),
        msg(2, "fieldRef", &OBJECT_FIELD_SELECTOR),
        msg(3, "resourceFieldRef", &RESOURCE_FIELD_SELECTOR),
        ptr(4, "mode", I32),
    ],
};

static CONFIG_MAP_VOLUME_SOURCE: Message = Message {
    name: "ConfigMapVolumeSource",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        rep(2, "items", m(&KEY_TO_PATH)),
        ptr(3, "defaultMode", I32),
        ptr(4, "optional", Bool),
    ],
};

/// `sources` has no `omitempty` upstream, hence `null` when empty.
static PROJECTED_VOLUME_SOURCE: Message = Message {
    name: "ProjectedVolumeSource",
    fields: &[
        rep_null(1, "sources", m(&VOLUME_PROJECTION)),
        ptr(2, "defaultMode", I32),
    ],
};

/// Unsupported (error if present): clusterTrustBundle (5), podCertificate (6).
static VOLUME_PROJECTION: Message = Message {
    name: "VolumeProjection",
    fields: &[
        msg(1, "secret", &SECRET_PROJECTION),
        msg(2, "downwardAPI", &DOWNWARD_API_PROJECTION),
        msg(3, "configMap", &CONFIG_MAP_PROJECTION),
        msg(4, "serviceAccountToken", &SERVICE_ACCOUNT_TOKEN_PROJECTION),
    ],
};

static SECRET_PROJECTION: Message = Message {
    name: "SecretProjection",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        rep(2, "items", m(&KEY_TO_PATH)),
        ptr(4, "optional", Bool),
    ],
};

static CONFIG_MAP_PROJECTION: Message = Message {
    name: "ConfigMapProjection",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        rep(2, "items", m(&KEY_TO_PATH)),
        ptr(4, "optional", Bool),
    ],
};

static DOWNWARD_API_PROJECTION: Message = Message {
    name: "DownwardAPIProjection",
    fields: &[rep(1, "items", m(&DOWNWARD_API_VOLUME_FILE))],
};

static SERVICE_ACCOUNT_TOKEN_PROJECTION: Message = Message {
    name: "ServiceAccountTokenProjection",
    fields: &[
        opt(1, "audience", Str),
        ptr(2, "expirationSeconds", I64),
        req(3, "path", Str),
    ],
};

static CSI_VOLUME_SOURCE: Message = Message {
    name: "CSIVolumeSource",
    fields: &[
        req(1, "driver", Str),
        ptr(2, "readOnly", Bool),
        ptr(3, "fsType", Str),
        map(4, "volumeAttributes", Str),
        msg(5, "nodePublishSecretRef", &LOCAL_OBJECT_REFERENCE),
    ],
};

static AFFINITY: Message = Message {
    name: "Affinity",
    fields: &[
        msg(1, "nodeAffinity", &NODE_AFFINITY),
        msg(2, "podAffinity", &POD_AFFINITY),
        msg(3, "podAntiAffinity", &POD_ANTI_AFFINITY),
    ],
};

static NODE_AFFINITY: Message = Message {
    name: "NodeAffinity",
    fields: &[
        msg(
            1,
            "requiredDuringSchedulingIgnoredDuringExecution",
            &NODE_SELECTOR,
        ),
        rep(
            2,
            "preferredDuringSchedulingIgnoredDuringExecution",
            m(&PREFERRED_SCHEDULING_TERM),
        ),
    ],
};

/// `nodeSelectorTerms` has no `omitempty` upstream, hence `null` when empty.
static NODE_SELECTOR: Message = Message {
    name: "NodeSelector",
    fields: &[rep_null(1, "nodeSelectorTerms", m(&NODE_SELECTOR_TERM))],
};

static NODE_SELECTOR_TERM: Message = Message {
    name: "NodeSelectorTerm",
    fields: &[
        rep(1, "matchExpressions", m(&NODE_SELECTOR_REQUIREMENT)),
        rep(2, "matchFields", m(&NODE_SELECTOR_REQUIREMENT)),
    ],
};

static NODE_SELECTOR_REQUIREMENT: Message = Message {
    name: "NodeSelectorRequirement",
    fields: &[
        req(1, "key", Str),
        req(2, "operator", Str),
        rep(3, "values", Str),
    ],
};

static PREFERRED_SCHEDULING_TERM: Message = Message {
    name: "PreferredSchedulingTerm",
    fields: &[
        req(1, "weight", I32),
        msg(2, "preference", &NODE_SELECTOR_TERM),
    ],
};

static POD_AFFINITY: Message = Message {
    name: "PodAffinity",
    fields: &[
        rep(
            1,
            "requiredDuringSchedulingIgnoredDuringExecution",
            m(&POD_AFFINITY_TERM),
        ),
        rep(
            2,
            "preferredDuringSchedulingIgnoredDuringExecution",
            m(&WEIGHTED_POD_AFFINITY_TERM),
        ),
    ],
};

static POD_ANTI_AFFINITY: Message = Message {
    name: "PodAntiAffinity",
    fields: POD_AFFINITY.fields,
};

static POD_AFFINITY_TERM: Message = Message {
    name: "PodAffinityTerm",
    fields: &[
        msg(1, "labelSelector", &LABEL_SELECTOR),
        rep(2, "namespaces", Str),
        req(3, "topologyKey", Str),
        msg(4, "namespaceSelector", &LABEL_SELECTOR),
        rep(5, "matchLabelKeys", Str),
        rep(6, "mismatchLabelKeys", Str),
    ],
};

static WEIGHTED_POD_AFFINITY_TERM: Message = Message {
    name: "WeightedPodAffinityTerm",
    fields: &[
        req(1, "weight", I32),
        msg(2, "podAffinityTerm", &POD_AFFINITY_TERM),
    ],
};

static HOST_ALIAS: Message = Message {
    name: "HostAlias",
    fields: &[req(1, "ip", Str), rep(2, "hostnames", Str)],
};

static POD_DNS_CONFIG: Message = Message {
    name: "PodDNSConfig",
    fields: &[
        rep(1, "nameservers", Str),
        rep(2, "searches", Str),
        rep(3, "options", m(&POD_DNS_CONFIG_OPTION)),
    ],
};

static POD_DNS_CONFIG_OPTION: Message = Message {
    name: "PodDNSConfigOption",
    fields: &[opt(1, "name", Str), ptr(2, "value", Str)],
};

static TOPOLOGY_SPREAD_CONSTRAINT: Message = Message {
    name: "TopologySpreadConstraint",
    fields: &[
        req(1, "maxSkew", I32),
        req(2, "topologyKey", Str),
        req(3, "whenUnsatisfiable", Str),
        msg(4, "labelSelector", &LABEL_SELECTOR),
        ptr(5, "minDomains", I32),
        ptr(6, "nodeAffinityPolicy", Str),
        ptr(7, "nodeTaintsPolicy", Str),
        rep(8, "matchLabelKeys", Str),
    ],
};

pub(super) static POD_TEMPLATE: Message = Message {
    name: "PodTemplate",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "template", &POD_TEMPLATE_SPEC),
    ],
};

/// What a scheduler POSTs to `pods/{name}/binding`.
pub(super) static BINDING: Message = Message {
    name: "Binding",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "target", &OBJECT_REFERENCE),
    ],
};

pub(super) static RESOURCE_QUOTA: Message = Message {
    name: "ResourceQuota",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &RESOURCE_QUOTA_SPEC),
        msg(3, "status", &RESOURCE_QUOTA_STATUS),
    ],
};

static RESOURCE_QUOTA_SPEC: Message = Message {
    name: "ResourceQuotaSpec",
    fields: &[
        map(1, "hard", Quantity),
        rep(2, "scopes", Str),
        msg(3, "scopeSelector", &SCOPE_SELECTOR),
    ],
};

static SCOPE_SELECTOR: Message = Message {
    name: "ScopeSelector",
    fields: &[rep(
        1,
        "matchExpressions",
        m(&SCOPED_RESOURCE_SELECTOR_REQUIREMENT),
    )],
};

static SCOPED_RESOURCE_SELECTOR_REQUIREMENT: Message = Message {
    name: "ScopedResourceSelectorRequirement",
    fields: &[
        req(1, "scopeName", Str),
        req(2, "operator", Str),
        rep(3, "values", Str),
    ],
};

static RESOURCE_QUOTA_STATUS: Message = Message {
    name: "ResourceQuotaStatus",
    fields: &[map(1, "hard", Quantity), map(2, "used", Quantity)],
};
