import { expect, it } from 'vitest';
import { checkpointErrorLog } from '../src/db/checkpoint-log.ts';

it('logs the first checkpoint failure at once, then one line a minute with the count', () => {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  let clock = 1_000;
  const report = checkpointErrorLog({ error: ((fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg })) as never }, () => clock)!;
  report('disk I/O error');
  expect(lines).toHaveLength(1);
  expect(lines[0]!.fields).toEqual({ err_message: 'disk I/O error', failures: 1 });
  expect(lines[0]!.msg).toMatch(/checkpoint failed/);
  for (let i = 0; i < 59; i++) {
    clock += 1_000;
    report('disk I/O error');
  }
  expect(lines).toHaveLength(1); // 59 more within the minute
  clock += 1_000;
  report('database or disk is full');
  expect(lines).toHaveLength(2);
  expect(lines[1]!.fields).toEqual({ err_message: 'database or disk is full', failures: 60 });
  expect(checkpointErrorLog(undefined)).toBeUndefined();
});
