/**
 * Graph reading and clean-ups the int8 rewrite needs before it reads a model's structure
 * (quantize.ts): ISNet's export carries no-op Casts and lists some nodes out of order.
 */
import { CutoutError } from '../errors.js';

type Node = InstanceType<typeof import('onnx-proto').onnx.NodeProto>;

const FLOAT = 1;

/** The names of a graph's outputs. */
export function graphOutputs(graph: { output?: { name?: string | null }[] | null }): Set<string> {
  return new Set((graph.output ?? []).map((o) => o.name!));
}

/** The nodes reading each tensor, by its name. */
export function consumersOf(nodes: Node[]): Map<string, Node[]> {
  const consumers = new Map<string, Node[]>();
  for (const n of nodes) {
    for (const i of n.input ?? []) {
      const list = consumers.get(i);
      if (list) list.push(n);
      else consumers.set(i, [n]);
    }
  }
  return consumers;
}

/** Activation ops whose outputs are float in a float model: a Cast to float after them changes nothing. */
const FLOAT_PRODUCERS = new Set(['Conv', 'Relu', 'Add', 'Resize', 'MaxPool']);

/**
 * The nodes without their no-op Casts, in topological order. A Cast to float of a float
 * activation changes nothing (ISNet's export wraps every Resize and residual sum in such pairs,
 * left from its fp16 form, and lists them after the other nodes), but it would sit between a
 * DequantizeLinear and the op that onnxruntime must see right after it to run that op on uint8.
 * Consumers read the Cast's input instead; a Cast that makes a graph output stays. The nodes'
 * inputs are renamed in place.
 */
export function withoutFloatCasts(nodes: Node[], outputs: Set<string>): Node[] {
  const producer = new Map<string, Node>();
  for (const n of nodes) for (const o of n.output ?? []) producer.set(o, n);
  const alias = new Map<string, string>();
  for (const n of nodes) {
    if (n.opType !== 'Cast' || Number(n.attribute?.find((a) => a.name === 'to')?.i?.toString()) !== FLOAT) continue;
    if (outputs.has(n.output![0]) || !FLOAT_PRODUCERS.has(producer.get(n.input![0])?.opType ?? '')) continue;
    alias.set(n.output![0], n.input![0]);
  }
  const resolve = (name: string): string => (alias.has(name) ? resolve(alias.get(name)!) : name);
  const kept = nodes.filter((n) => !alias.has(n.output?.[0] ?? ''));
  for (const n of kept) n.input = (n.input ?? []).map(resolve);
  return topologicalOrder(kept);
}

/** Kahn's order, stable: nodes keep their listed order wherever their inputs allow it. */
function topologicalOrder(nodes: Node[]): Node[] {
  const producerIndex = new Map<string, number>();
  nodes.forEach((n, i) => (n.output ?? []).forEach((o) => producerIndex.set(o, i)));
  // The distinct nodes each node reads from (graph inputs and initializers have none).
  const producers = nodes.map((n) => new Set((n.input ?? []).map((x) => producerIndex.get(x)).filter((p): p is number => p !== undefined)));
  const waiting = producers.map((p) => p.size);
  const dependents = nodes.map(() => [] as number[]);
  producers.forEach((ps, i) => ps.forEach((p) => dependents[p].push(i)));
  const ready = nodes.map((_, i) => i).filter((i) => waiting[i] === 0);
  const order: Node[] = [];
  while (ready.length) {
    ready.sort((x, y) => x - y);
    const i = ready.shift()!;
    order.push(nodes[i]);
    for (const d of dependents[i]) if (--waiting[d] === 0) ready.push(d);
  }
  if (order.length !== nodes.length) throw new CutoutError('processing_failed', 'The model graph has a cycle');
  return order;
}
