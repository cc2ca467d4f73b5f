// The sender allowlist of a mailbox: entries are exact addresses (`ann@example.com`) or whole
// domains (`@example.com` or `example.com`), compared case-insensitively with the envelope sender.
// Its settings endpoint arrives with the addresses feature; the rule is enforced at RCPT time now.

export function senderAllowed(entries: string[], mailFrom: string | null): boolean {
  if (!mailFrom) return false; // bounces (null sender) cannot prove they belong to an allowed sender
  const sender = mailFrom.trim().toLowerCase();
  const domain = sender.slice(sender.lastIndexOf('@') + 1);
  return entries.some((raw) => {
    const e = raw.trim().toLowerCase();
    if (!e) return false;
    if (e.startsWith('@')) return domain === e.slice(1);
    if (!e.includes('@')) return domain === e;
    return sender === e;
  });
}
