import { parentPort } from 'node:worker_threads';
import { analyzeMessage, type AnalyzeInput } from './analyze.ts';
import type { DnsResolver } from './authenticate.ts';
import { dnsError } from './authenticate-dns.ts';
import { KeptAnswers } from './dns-cache.ts';

// A thread of the analysis pool (src/inbound/analyze-pool.ts): runs analyzeMessage for the event
// loop. DNS stays with the main thread (its resolver, cache and the tests' stand-ins), asked here
// by message. An answer that comes with a time until which it stays good (from the main thread's
// caching resolver, src/inbound/dns-cache.ts) is kept here until then, so that a stream of mail
// from one domain does not wait for the busy event loop twice per message.

export type ToWorker =
  | { kind: 'analyze'; id: number; bytes: Uint8Array; input: Omit<AnalyzeInput, 'receivedAt'> & { receivedAt: number } }
  | { kind: 'dns'; qid: number; value?: unknown; error?: { code: string; message: string }; until?: number };

export type FromWorker =
  | { kind: 'done'; id: number; analysis: unknown }
  | { kind: 'failed'; id: number; message: string }
  | { kind: 'dns'; qid: number; name: string; rrtype: string };

const port = parentPort!;
let nextQid = 1;
const lookups = new Map<number, { name: string; rrtype: string; resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
// Answers the main thread said may be reused. A kept "no record" is thrown as the same error each
// time: building one (its stack) cost more than the rest of the lookup.
const kept = new KeptAnswers<{ value?: unknown; error?: Error; until: number }>();

const resolver: DnsResolver = (name, rrtype) =>
  new Promise((resolve, reject) => {
    const hit = kept.get(name, rrtype);
    if (hit) return hit.error ? reject(hit.error) : resolve(hit.value);
    const qid = nextQid++;
    lookups.set(qid, { name, rrtype, resolve, reject });
    port.postMessage({ kind: 'dns', qid, name, rrtype } satisfies FromWorker);
  });

port.on('message', (msg: ToWorker) => {
  if (msg.kind === 'dns') {
    const pending = lookups.get(msg.qid);
    lookups.delete(msg.qid);
    if (!pending) return;
    const error = msg.error && dnsError(msg.error.code, msg.error.message);
    kept.keep(pending.name, pending.rrtype, { value: msg.value, error, until: msg.until ?? 0 });
    if (error) pending.reject(error);
    else pending.resolve(msg.value);
    return;
  }
  const bytes = Buffer.from(msg.bytes.buffer, msg.bytes.byteOffset, msg.bytes.byteLength);
  analyzeMessage(bytes, { ...msg.input, receivedAt: new Date(msg.input.receivedAt) }, resolver).then(
    (analysis) => {
      // The result's bytes go back moved, not copied: each in a buffer of its own size, so that a
      // small Buffer never carries the rest of the 8 KiB pool slab it was cut from.
      const moved = new Set<ArrayBuffer>();
      const own = (b: Buffer): Buffer => {
        const whole = b.byteOffset === 0 && b.byteLength === b.buffer.byteLength && !moved.has(b.buffer as ArrayBuffer) ? b : Buffer.from(new Uint8Array(b));
        moved.add(whole.buffer as ArrayBuffer);
        return whole;
      };
      const result = {
        ...analysis,
        parsed: { ...analysis.parsed, attachments: analysis.parsed.attachments.map((a) => ({ ...a, content: own(a.content) })) },
        jsonBytes: analysis.jsonBytes.map(own),
      };
      port.postMessage({ kind: 'done', id: msg.id, analysis: result } satisfies FromWorker, [...moved]);
    },
    (err: unknown) => port.postMessage({ kind: 'failed', id: msg.id, message: String((err as Error)?.message ?? err) } satisfies FromWorker),
  );
});
