/**
 * A real OTLP/HTTP trace receiver on 127.0.0.1 for the tracing tests: accepts POST /v1/traces in
 * both encodings the SDK sends, http/json and http/protobuf, and keeps every span, flattened, with
 * its resource's attributes. The protobuf is decoded by protobufjs (in the tree already) from the
 * messages of OTLP's own .proto files (opentelemetry-proto: collector/trace/v1, trace/v1,
 * resource/v1, common/v1), reduced to the fields read here with their numbers unchanged.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import protobuf from 'protobufjs';

const OTLP_TRACES_PROTO = `
syntax = "proto3";
message AnyValue {
  oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; bytes bytes_value = 7; }
}
message KeyValue { string key = 1; AnyValue value = 2; }
message Resource { repeated KeyValue attributes = 1; }
message InstrumentationScope { string name = 1; string version = 2; }
message Status { string message = 2; int32 code = 3; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4; string name = 5; int32 kind = 6;
  fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8; repeated KeyValue attributes = 9; Status status = 15;
}
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
`;

const REQUEST = protobuf.parse(OTLP_TRACES_PROTO, { keepCase: false }).root.lookupType('ExportTraceServiceRequest');

export type AttributeValue = string | number | boolean;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, AttributeValue>;
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
  resource: Record<string, AttributeValue>;
  /** How it came: the request's Content-Type. */
  encoding: 'json' | 'protobuf';
}

export interface OtlpReceiver {
  /** The endpoint to give as OTEL_EXPORTER_OTLP_ENDPOINT (the SDK appends /v1/traces). */
  url: string;
  spans: ReceivedSpan[];
  /** The raw bodies as received (to search for what must never be sent). */
  bodies: Buffer[];
  /** Resolves once `match` holds for the spans received so far. */
  waitFor(what: string, match: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
}

const hex = (v: unknown): string => (typeof v === 'string' ? (/^[0-9a-f]*$/i.test(v) ? v.toLowerCase() : Buffer.from(v, 'base64').toString('hex')) : Buffer.from((v as Uint8Array) ?? []).toString('hex'));

function valueOf(v: any): AttributeValue {
  if (!v) return '';
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return Number(v.doubleValue);
  return '';
}

function attributesOf(list: any[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, valueOf(kv.value)]));
}

/** The spans of one export request, decoded to plain objects (protobufjs' toObject, or JSON.parse). */
function spansOf(body: Buffer, encoding: 'json' | 'protobuf'): ReceivedSpan[] {
  const request: any = encoding === 'json'
    ? JSON.parse(body.toString('utf8'))
    : REQUEST.toObject(REQUEST.decode(body), { longs: String, enums: Number, defaults: false, oneofs: false });
  const out: ReceivedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: hex(s.traceId), spanId: hex(s.spanId), parentSpanId: hex(s.parentSpanId ?? ''), name: s.name, kind: Number(s.kind ?? 0),
          startMs: Number(BigInt(s.startTimeUnixNano) / 1000n) / 1000, endMs: Number(BigInt(s.endTimeUnixNano) / 1000n) / 1000,
          attributes: attributesOf(s.attributes), statusCode: Number(s.status?.code ?? 0), resource, encoding,
        });
      }
    }
  }
  return out;
}

export async function startOtlpReceiver(t: Tap.Test): Promise<OtlpReceiver> {
  const receiver: OtlpReceiver = {
    url: '',
    spans: [],
    bodies: [],
    async waitFor(what, match, timeoutMs = 60_000) {
      const until = Date.now() + timeoutMs;
      while (!match(receiver.spans)) {
        if (Date.now() > until) throw new Error(`waited ${timeoutMs} ms for ${what}; spans: ${receiver.spans.map((s) => s.name).join(', ')}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      return receiver.spans;
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const type = req.headers['content-type'] ?? '';
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const encoding = type.startsWith('application/json') ? 'json' : type.startsWith('application/x-protobuf') ? 'protobuf' : null;
      if (!encoding) {
        res.writeHead(415).end();
        return;
      }
      const body = Buffer.concat(chunks);
      receiver.bodies.push(body);
      receiver.spans.push(...spansOf(body, encoding));
      // An empty ExportTraceServiceResponse: full success.
      if (encoding === 'json') res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'Content-Type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  return receiver;
}
