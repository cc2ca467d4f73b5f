// Where a received message's files live: `_email/yyyy/mm/dd/<email id>` (UTC date of receipt).
// The id makes the folder unique, so nothing a sender chooses decides a path outside it.
export function emailDirectory(receivedAt: Date, emailId: string): string {
  const d = receivedAt.toISOString();
  return `_email/${d.slice(0, 4)}/${d.slice(5, 7)}/${d.slice(8, 10)}/${emailId}`;
}
