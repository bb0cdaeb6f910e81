/**
 * deploy/kubernetes/: every manifest is valid against Kubernetes' own schemas (kubernetes-models),
 * and holds what the issue asks: probes on paths that a real `cutout serve` and `cutout
 * model-server` answer, container ports that are the ports the servers are told to use, env names
 * that are real settings (a `_FILE` only for a secret), restricted pod security, a grace period at
 * least a job's lease, selectors that match. No cluster runs here: nothing is applied.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { parseAllDocuments } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Service } from 'kubernetes-models/v1/Service';
import { Secret } from 'kubernetes-models/v1/Secret';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { SETTINGS } from '../../src/settings.js';
import { LIMITS } from '../../src/limits.js';
import { startListening } from '../helpers/process.js';

const DIR = path.resolve(import.meta.dirname, '..', '..', 'deploy', 'kubernetes');
const MODELS = { Deployment, Service, Secret, HorizontalPodAutoscaler, PodDisruptionBudget, Ingress } as Record<string, new (data: any) => { validate(): void }>;

interface Manifest { file: string; doc: any }

const kustomization = parseAllDocuments(fs.readFileSync(path.join(DIR, 'kustomization.yaml'), 'utf8'))[0].toJS();
const read = (file: string): Manifest[] => parseAllDocuments(fs.readFileSync(path.join(DIR, file), 'utf8')).map((d) => ({ file, doc: d.toJS() }));

/** What `kubectl apply -k` applies. */
const all = (kustomization.resources as string[]).flatMap(read);
/** The two files an operator adapts and applies once, outside the kustomization. */
const examples = [...read('secret.example.yaml'), ...read('ingress.example.yaml')];
const deployments = all.filter((m) => m.doc.kind === 'Deployment');
const envOf = (container: any): Record<string, string> => Object.fromEntries((container.env ?? []).map((e: any) => [e.name, e.value]));

t.test('every manifest of the kustomization is valid by its schema', async (t) => {
  t.same([...new Set(all.map((m) => m.doc.kind))].sort(), ['Deployment', 'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'Service'], 'the kinds the issue lists');
  t.same(examples.map((m) => m.doc.kind), ['Secret', 'Ingress'], 'the examples: a Secret and an Ingress');
  for (const { file, doc } of [...all, ...examples]) {
    const Model = MODELS[doc.kind];
    t.ok(Model, `${file}: ${doc.kind} is a known kind`);
    t.doesNotThrow(() => new Model(doc).validate(), `${file}: ${doc.kind} ${doc.metadata.name} validates`);
  }
  // The validator does reject a broken one: a probe without a port.
  const broken = structuredClone(deployments[0].doc);
  broken.spec.template.spec.containers[0].readinessProbe.httpGet.port = undefined;
  broken.spec.replicas = 'two';
  t.throws(() => new Deployment(broken).validate(), 'a manifest with a wrong type is refused');
});

t.test('restricted pod security, grace period, resources, preStop', async (t) => {
  t.equal(deployments.length, 2, 'a Deployment per server kind');
  for (const { doc } of deployments) {
    const pod = doc.spec.template.spec;
    const name = doc.metadata.name;
    t.match(pod.securityContext, { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } }, `${name}: pod security`);
    t.ok(pod.terminationGracePeriodSeconds * 1000 >= LIMITS.jobLeaseMs, `${name}: grace ${pod.terminationGracePeriodSeconds} s >= a job's lease`);
    for (const c of pod.containers) {
      t.match(c.securityContext, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } }, `${name}: container security`);
      t.ok(c.resources?.requests?.cpu && c.resources?.requests?.memory && c.resources?.limits?.memory, `${name}: requests and a memory limit`);
      t.ok(c.lifecycle?.preStop, `${name}: preStop`);
      t.ok(c.volumeMounts.some((v: any) => v.mountPath === '/tmp'), `${name}: a writable /tmp`);
      const lease = Number(envOf(c).CUTOUT_LEASE_MS ?? LIMITS.jobLeaseMs);
      t.ok(pod.terminationGracePeriodSeconds * 1000 >= lease, `${name}: grace >= its lease ${lease} ms`);
    }
  }
});

t.test('env names are real settings; _FILE only for secrets; files from the mounted Secret', async (t) => {
  const byEnv = new Map(SETTINGS.filter((r) => r.env).map((r) => [r.env!, r]));
  const secret = examples.find((m) => m.doc.kind === 'Secret')!.doc;
  for (const { doc } of deployments) {
    for (const c of doc.spec.template.spec.containers) {
      const mounts = c.volumeMounts as { name: string; mountPath: string }[];
      for (const [name, value] of Object.entries(envOf(c))) {
        if (!name.startsWith('CUTOUT_')) {
          t.match(name, /^AWS_/, `${doc.metadata.name}: ${name} is the AWS SDK's`);
          continue;
        }
        const base = name.replace(/_FILE$/, '');
        t.ok(byEnv.has(base), `${doc.metadata.name}: ${base} is a setting`);
        if (name.endsWith('_FILE')) {
          t.ok(byEnv.get(base)?.secret, `${name}: ${base} is a secret`);
          const mount = mounts.find((m) => value.startsWith(m.mountPath + '/'));
          t.ok(mount && secret.stringData[path.basename(value)] !== undefined, `${name}: ${value} is a key of the Secret, mounted`);
        }
      }
    }
  }
});

t.test('ports and selectors agree', async (t) => {
  for (const { doc } of deployments) {
    const c = doc.spec.template.spec.containers[0];
    const env = envOf(c);
    const port = Number(env.CUTOUT_PORT ?? env.CUTOUT_MODEL_SERVER_PORT);
    const metricsPort = env.CUTOUT_METRICS_PORT === undefined ? [] : [Number(env.CUTOUT_METRICS_PORT)];
    t.same(c.ports.map((p: any) => p.containerPort), [port, ...metricsPort], `${doc.metadata.name}: the container ports are the ports it is told to use`);
    const labels = doc.spec.template.metadata.labels;
    for (const other of all.filter((m) => ['Service', 'PodDisruptionBudget'].includes(m.doc.kind) && m.doc.metadata.name === doc.metadata.name)) {
      const selector = other.doc.spec.selector.matchLabels ?? other.doc.spec.selector;
      t.match(labels, selector, `${other.doc.kind} ${other.doc.metadata.name} selects the pods`);
      if (other.doc.kind === 'Service') t.ok(c.ports.some((p: any) => p.name === other.doc.spec.ports[0].targetPort), 'its targetPort is a named container port');
    }
  }
  const hpas = all.filter((m) => m.doc.kind === 'HorizontalPodAutoscaler').map((m) => m.doc.spec.scaleTargetRef.name).sort();
  t.same(hpas, deployments.map((d) => d.doc.metadata.name).sort(), 'an HPA for each Deployment: the model servers, where inference runs, scale too');
});

t.test('what an operator applies does no harm (issue 51)', async (t) => {
  t.notOk((kustomization.resources as string[]).some((f) => /secret/i.test(f)), 'the kustomization does not include the Secret: apply -k never resets the real one');
  const images = kustomization.images as { name: string; newName?: string }[];
  const cutout = images.find((i) => i.name === 'cutout');
  t.ok(cutout?.newName && cutout.newName.includes('/'), `the kustomization names the image with a registry (${cutout?.newName}), not the bare cutout:0.1.0 that no registry has`);
  const api = deployments.find((d) => d.doc.metadata.name === 'cutout-api')!.doc;
  const apiEnv = envOf(api.spec.template.spec.containers[0]);
  const metricsPort = Number(apiEnv.CUTOUT_METRICS_PORT);
  t.ok(metricsPort > 0 && metricsPort !== Number(apiEnv.CUTOUT_PORT), '/metrics on a port of its own, off the API port');
  t.equal(api.spec.template.metadata.annotations['prometheus.io/port'], String(metricsPort), 'the scrape annotation names the metrics port');
  const ingress = examples.find((m) => m.doc.kind === 'Ingress')!.doc;
  const backend = ingress.spec.rules[0].http.paths[0].backend.service;
  t.same(backend, { name: 'cutout-api', port: { name: 'http' } }, 'the Ingress routes to the API port only');
  const bodyLimit = ingress.metadata.annotations['nginx.ingress.kubernetes.io/proxy-body-size'] as string;
  t.ok(Number.parseInt(bodyLimit, 10) * 1024 * 1024 >= LIMITS.maxJsonBytes, `ingress-nginx's body limit (${bodyLimit}) holds the API's largest body (${(LIMITS.maxJsonBytes / 2 ** 20).toFixed(1)} MB), not its 1 MB default`);
  for (const { doc } of deployments.filter((d) => d.doc.metadata.name === 'cutout-model')) {
    t.ok(doc.spec.template.spec.containers[0].resources.limits.cpu, 'the model server has a CPU limit, which sizes its threads');
  }
});

t.test('the probe paths are answered by real servers', async (t) => {
  const data = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-k8s-'));
  t.teardown(() => fs.rmSync(data, { recursive: true, force: true }));
  const env = { ...process.env, CUTOUT_HOME: data };
  const serve = await startListening(t, ['serve', '--port', '0', '--preload', '--no-exit-with-parent'], { env, timeoutMs: 60_000 });
  const model = await startListening(t, ['model-server', '--port', '0'], { env, timeoutMs: 60_000 });
  const servers: Record<string, string> = { 'cutout-api': serve.url, 'cutout-model': model.url };
  for (const { doc } of deployments) {
    const c = doc.spec.template.spec.containers[0];
    for (const probe of ['readinessProbe', 'livenessProbe', 'startupProbe']) {
      const p = c[probe]?.httpGet?.path;
      if (!p) continue;
      const res = await fetch(servers[doc.metadata.name] + p);
      t.equal(res.status, 200, `${doc.metadata.name} ${probe} ${p}: 200`);
    }
  }
  await serve.stop();
  await model.stop();
});

/**
 * The optional KEDA overlay (deploy/keda/, issue 56). kubernetes-models has no KEDA types, so the
 * ScaledObject is checked against a schema of the fields of KEDA 2's CRD (keda.sh/v1alpha1) that
 * it uses, strict about unknown fields, and by what it must say.
 */
const SCALED_OBJECT_SCHEMA = {
  type: 'object',
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  properties: {
    apiVersion: { const: 'keda.sh/v1alpha1' },
    kind: { const: 'ScaledObject' },
    metadata: { type: 'object', required: ['name'], properties: { name: { type: 'string' }, labels: { type: 'object' } } },
    spec: {
      type: 'object',
      additionalProperties: false,
      required: ['scaleTargetRef', 'triggers'],
      properties: {
        scaleTargetRef: { type: 'object', additionalProperties: false, required: ['name'], properties: { apiVersion: { type: 'string' }, kind: { type: 'string' }, name: { type: 'string' }, envSourceContainerName: { type: 'string' } } },
        minReplicaCount: { type: 'integer', minimum: 0 },
        maxReplicaCount: { type: 'integer', minimum: 1 },
        pollingInterval: { type: 'integer', minimum: 1 },
        cooldownPeriod: { type: 'integer', minimum: 0 },
        advanced: { type: 'object', additionalProperties: false, properties: { restoreToOriginalReplicaCount: { type: 'boolean' }, horizontalPodAutoscalerConfig: { type: 'object', properties: { name: { type: 'string' }, behavior: { type: 'object' } } } } },
        triggers: {
          type: 'array', minItems: 1,
          items: {
            type: 'object', additionalProperties: false, required: ['type', 'metadata'],
            properties: {
              type: { type: 'string' }, name: { type: 'string' }, useCachedMetrics: { type: 'boolean' },
              metricType: { enum: ['AverageValue', 'Value', 'Utilization'] },
              // KEDA's metadata is a map of strings: a bare number would be refused by the API server.
              metadata: { type: 'object', additionalProperties: { type: 'string' } },
              authenticationRef: { type: 'object', required: ['name'] },
            },
          },
        },
      },
    },
  },
};

t.test('the KEDA overlay: a ScaledObject on the queue depth and CPU in place of the API servers\' HPA', async (t) => {
  const { Ajv } = await import('ajv');
  const KEDA = path.resolve(DIR, '..', 'keda');
  const overlay = parseAllDocuments(fs.readFileSync(path.join(KEDA, 'kustomization.yaml'), 'utf8'))[0].toJS();
  t.ok(overlay.resources.includes('../kubernetes'), 'an overlay of deploy/kubernetes/');
  const docs = (overlay.resources as string[]).filter((r) => r.endsWith('.yaml')).flatMap((f) => parseAllDocuments(fs.readFileSync(path.join(KEDA, f), 'utf8')).map((d) => d.toJS()));
  const so = docs.find((d) => d.kind === 'ScaledObject');
  const validate = new Ajv({ allErrors: true, strict: false }).compile(SCALED_OBJECT_SCHEMA);
  t.ok(validate(so), `the ScaledObject has KEDA's shape: ${JSON.stringify(validate.errors ?? [])}`);
  const broken = structuredClone(so);
  broken.spec.triggers[0].metadata.threshold = 4;
  t.notOk(validate(broken), 'the schema refuses a number where KEDA wants a string');

  // The patch deletes exactly the API servers' HPA (KEDA's own HPA replaces it; two would fight).
  const patches = (overlay.patches as { path: string }[]).map((p) => parseAllDocuments(fs.readFileSync(path.join(KEDA, p.path), 'utf8'))[0].toJS());
  t.same(patches.map((p) => [p.$patch, p.kind, p.metadata.name]), [['delete', 'HorizontalPodAutoscaler', 'cutout-api']], 'the overlay deletes the API HPA');
  const apiHpa = all.find((m) => m.doc.kind === 'HorizontalPodAutoscaler' && m.doc.metadata.name === 'cutout-api')!.doc;
  t.same(so.spec.scaleTargetRef, apiHpa.spec.scaleTargetRef, 'the ScaledObject scales what the HPA scaled');
  t.ok(deployments.some((d) => d.doc.metadata.name === so.spec.scaleTargetRef.name), 'a Deployment of the base');
  t.equal(so.spec.minReplicaCount, apiHpa.spec.minReplicas, 'the same floor');
  t.equal(so.spec.maxReplicaCount, apiHpa.spec.maxReplicas, 'the same ceiling');
  const byType = Object.fromEntries(so.spec.triggers.map((tr: any) => [tr.type, tr]));
  t.same(Object.keys(byType).sort(), ['cpu', 'prometheus'], 'a Prometheus trigger and the CPU rule');
  t.equal(byType.prometheus.metadata.query, 'max(cutout_queue_depth{kind="job"})', 'the fleet-wide job queue (max: every server reports the same figure)');
  t.ok(Number(byType.prometheus.metadata.threshold) > 0, 'a threshold per replica');
  t.equal(byType.cpu.metricType, 'Utilization');
  t.equal(Number(byType.cpu.metadata.value), apiHpa.spec.metrics[0].resource.target.averageUtilization, 'the removed HPA\'s CPU target');

  // kustomize itself (kubectl's), where it is installed: what apply -k would send.
  const kubectl = ['/usr/bin/kubectl', '/usr/local/bin/kubectl'].find((p) => fs.existsSync(p));
  if (!kubectl) {
    t.comment('kubectl is not installed: the overlay was not built by kustomize (the checks above stand)');
    return;
  }
  const { execFileSync } = await import('node:child_process');
  const built = parseAllDocuments(execFileSync(kubectl, ['kustomize', KEDA], { encoding: 'utf8' })).map((d) => d.toJS());
  const hpas = built.filter((d) => d.kind === 'HorizontalPodAutoscaler').map((d) => d.spec.scaleTargetRef.name);
  t.same(hpas, ['cutout-model'], 'built: the model servers keep their HPA, the API servers have none of their own');
  t.same(built.filter((d) => d.kind === 'ScaledObject').map((d) => d.spec.scaleTargetRef.name), ['cutout-api'], 'built: one ScaledObject, for the API servers');
  t.equal(built.filter((d) => d.kind === 'Deployment').length, 2, 'built: both Deployments of the base');
});
