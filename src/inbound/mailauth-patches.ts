import { createRequire } from 'node:module';

// mailauth's DKIM parser (lib/dkim/message-parser.js, the base of its verifier and signer) turns
// each bare LF into CRLF with a loop over every byte of the message: 0.37 ms of a 100 KiB signed
// message's 2.7 ms analysis, and real mail is mostly signed. ensureLinebreaksFast() yields the
// same buffers, finding the LFs with indexOf. Its rule, kept as it is: an LF is left alone when the
// last byte before it that is not an LF (in this chunk or an earlier one) is a CR, so in "\r\n\n"
// the second LF stays bare too. Before patching, both read a set of awkward chunk sequences and the
// patch is made only when they agree (another mailauth version then stays as it is; the test fails
// loudly).

interface LineBreaker {
  lastByte?: number;
}

const CRLF = Buffer.from('\r\n');

export function* ensureLinebreaksFast(this: LineBreaker, input: Buffer): Generator<Buffer> {
  let pos = 0;
  let from = 0;
  for (;;) {
    const lf = input.indexOf(0x0a, from);
    if (lf < 0) break;
    // No LF lies between `from` and `lf`: the byte before it, if any, is the last non-LF byte.
    if (lf > from) this.lastByte = input[lf - 1];
    if (this.lastByte !== 0x0d) {
      yield lf === 0 || pos === lf ? Buffer.from(CRLF) : Buffer.concat([input.subarray(pos, lf), CRLF]);
      pos = lf + 1;
    }
    from = lf + 1;
  }
  if (input.length > from) this.lastByte = input[input.length - 1];
  if (pos === 0) yield input;
  else if (pos < input.length) yield input.subarray(pos);
}

type Breaker = (this: LineBreaker, input: Buffer) => Iterable<Buffer>;

const SAMPLES: string[][] = [
  ['a\nb\r\nc\r\n\nd\n', '\n', 'e\r', '\nf\n\n\r\n'],
  ['\n\n\r\n\r\r\n'],
  ['x\r', '\r', '\n', '\n', 'tail'],
  ['no line break', '', 'still none'],
  ['\r\n', '\n\r', '\n'],
];

/** What a breaker yields for a sequence of chunks, and its state after each. */
function yields(breaker: Breaker, chunks: string[]): string {
  const self: LineBreaker = {};
  const out: string[] = [];
  for (const chunk of chunks) {
    for (const piece of breaker.call(self, Buffer.from(chunk, 'latin1'))) out.push(piece.toString('latin1'));
    out.push(`|${self.lastByte}`);
  }
  return JSON.stringify(out);
}

let state: 'unpatched' | 'patched' | 'unavailable' = 'unpatched';

export function patchMailauthLineBreaks(): 'patched' | 'unavailable' {
  if (state !== 'unpatched') return state;
  state = 'unavailable';
  try {
    const require = createRequire(import.meta.url);
    const { MessageParser } = require('mailauth/lib/dkim/message-parser.js') as { MessageParser?: { prototype: { ensureLinebreaks?: Breaker } } };
    const proto = MessageParser?.prototype;
    const original = proto?.ensureLinebreaks;
    if (!proto || typeof original !== 'function') return state;
    if (SAMPLES.some((chunks) => yields(original, chunks) !== yields(ensureLinebreaksFast, chunks))) return state;
    proto.ensureLinebreaks = ensureLinebreaksFast;
    state = 'patched';
  } catch {
    state = 'unavailable';
  }
  return state;
}
