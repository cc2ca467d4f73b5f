import { parentPort } from 'node:worker_threads';
import { analyzeMessage, type AnalyzeInput } from './analyze.ts';
import type { DnsResolver } from './authenticate.ts';
import { dnsError } from './authenticate-dns.ts';

// A thread of the analysis pool (src/inbound/analyze-pool.ts): runs analyzeMessage for the event
// loop. DNS stays with the main thread (its resolver, cache and the tests' stand-ins), asked here
// by message.

export type ToWorker =
  | { kind: 'analyze'; id: number; bytes: Uint8Array; input: Omit<AnalyzeInput, 'receivedAt'> & { receivedAt: number } }
  | { kind: 'dns'; qid: number; value?: unknown; error?: { code: string; message: string } };

export type FromWorker =
  | { kind: 'done'; id: number; analysis: unknown }
  | { kind: 'failed'; id: number; message: string }
  | { kind: 'dns'; qid: number; name: string; rrtype: string };

const port = parentPort!;
let nextQid = 1;
const lookups = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();

const resolver: DnsResolver = (name, rrtype) =>
  new Promise((resolve, reject) => {
    const qid = nextQid++;
    lookups.set(qid, { resolve, reject });
    port.postMessage({ kind: 'dns', qid, name, rrtype } satisfies FromWorker);
  });

port.on('message', (msg: ToWorker) => {
  if (msg.kind === 'dns') {
    const pending = lookups.get(msg.qid);
    lookups.delete(msg.qid);
    if (msg.error) pending?.reject(dnsError(msg.error.code, msg.error.message));
    else pending?.resolve(msg.value);
    return;
  }
  const bytes = Buffer.from(msg.bytes.buffer, msg.bytes.byteOffset, msg.bytes.byteLength);
  analyzeMessage(bytes, { ...msg.input, receivedAt: new Date(msg.input.receivedAt) }, resolver).then(
    (analysis) => port.postMessage({ kind: 'done', id: msg.id, analysis } satisfies FromWorker),
    (err: unknown) => port.postMessage({ kind: 'failed', id: msg.id, message: String((err as Error)?.message ?? err) } satisfies FromWorker),
  );
});
