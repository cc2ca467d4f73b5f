import type { ParsedEmail } from './parse-types.ts';

// Deterministic spam signals seen at receipt, stored on the email for the labeler. GTUBE is the
// standard test string every spam filter flags; upstream filters announce verdicts in headers.
const GTUBE = Buffer.from('XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X');

export function spamSignals(raw: Buffer, parsed: ParsedEmail): string[] {
  const flags: string[] = [];
  if (raw.includes(GTUBE)) flags.push('gtube');
  for (const h of parsed.headers) {
    const name = h.name.toLowerCase();
    if (name === 'x-spam-flag' && /^\s*yes\b/i.test(h.value)) flags.push('x_spam_flag');
    else if (name === 'x-spam-status' && /^\s*yes\b/i.test(h.value)) flags.push('x_spam_status');
  }
  return [...new Set(flags)];
}
