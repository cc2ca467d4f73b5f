import { describe, expect, it } from 'vitest';
import { GroupCommit } from '../src/db/group-commit.ts';

// The group commit of received mail (src/db/group-commit.ts): its gathering window for
// announced messages, and one bad item never failing the others.

function recorder() {
  const groups: string[][] = [];
  let fail: string | null = null;
  const commit = async (items: string[]) => {
    groups.push([...items]);
    if (fail && items.includes(fail)) throw new Error(`bad ${fail}`);
  };
  return { groups, commit, failOn: (item: string) => void (fail = item) };
}

/** Lets the event loop go round n times (a group that does not wait would be committed by then). */
async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((res) => setImmediate(res));
}

describe('group commit', () => {
  it('commits a lone submission at once when nothing is expected, even with a long window', async () => {
    const r = recorder();
    const gc = new GroupCommit(r.commit, { windowMs: 60_000 });
    await gc.submit(['a']);
    expect(r.groups).toEqual([['a']]);
  });

  it('waits for an expected submission and commits both in one transaction', async () => {
    const r = recorder();
    const gc = new GroupCommit(r.commit, { windowMs: 60_000 });
    const later = gc.expect();
    const first = gc.submit(['a']);
    // Several turns of the event loop: the group is still waiting for the announced item.
    await turns(5);
    expect(r.groups).toEqual([]);
    const second = gc.submit(['b'], later);
    await Promise.all([first, second]);
    expect(r.groups).toEqual([['a', 'b']]);
  });

  it('stops waiting when an expected submission is cancelled (a refused message)', async () => {
    const r = recorder();
    const gc = new GroupCommit(r.commit, { windowMs: 60_000 });
    const refused = gc.expect();
    const first = gc.submit(['a']);
    await turns(1);
    refused();
    refused(); // a second call changes nothing
    await first;
    expect(r.groups).toEqual([['a']]);
    // The count went back to zero: the next lone submission does not wait either.
    await gc.submit(['b']);
    expect(r.groups).toEqual([['a'], ['b']]);
  });

  it('commits without a late expected submission once the window is over', async () => {
    const r = recorder();
    const gc = new GroupCommit(r.commit, { windowMs: 50 });
    const late = gc.expect();
    const first = gc.submit(['a']);
    // Within the window the group waits (without the window it would be committed by now) ...
    await turns(5);
    expect(r.groups).toEqual([]);
    // ... and once it is over, it is committed without the late one.
    await first;
    expect(r.groups).toEqual([['a']]);
    await gc.submit(['b'], late);
    expect(r.groups).toEqual([['a'], ['b']]);
  });

  it('waits only for items announced before it began gathering: later ones go to the next group', async () => {
    const r = recorder();
    const gc = new GroupCommit(r.commit, { windowMs: 60_000 });
    const early = gc.expect();
    const first = gc.submit(['a']);
    await turns(3); // the group is gathering, waiting for the early item
    expect(r.groups).toEqual([]);
    const late = gc.expect();
    // The early item arrives: the group is committed at once, without waiting out the window for
    // the late one (under a steady stream something is always announced).
    const second = gc.submit(['b'], early);
    await Promise.all([first, second]);
    expect(r.groups).toEqual([['a', 'b']]);
    await gc.submit(['c'], late);
    expect(r.groups).toEqual([['a', 'b'], ['c']]);
  });

  it('takes a later announced item that has arrived by the time the group is committed', async () => {
    const r = recorder();
    const gc = new GroupCommit(r.commit, { windowMs: 60_000 });
    const early = gc.expect();
    const first = gc.submit(['a']);
    await turns(3);
    const late = gc.expect();
    const lateDone = gc.submit(['b'], late);
    await Promise.all([first, lateDone, gc.submit(['c'], early)]);
    expect(r.groups).toEqual([['a', 'b', 'c']]);
  });

  it('never waits with a window of 0, whatever is expected', async () => {
    const r = recorder();
    const gc = new GroupCommit(r.commit, { windowMs: 0 });
    gc.expect();
    await gc.submit(['a']);
    expect(r.groups).toEqual([['a']]);
  });

  it('does not wait past maxItems: a full group is committed at once', async () => {
    const r = recorder();
    const gc = new GroupCommit(r.commit, { windowMs: 60_000, maxItems: 2 });
    gc.expect();
    await gc.submit(['a', 'b']);
    expect(r.groups).toEqual([['a', 'b']]);
  });

  it('retries a failed group item by item, so only the bad submission fails', async () => {
    const r = recorder();
    r.failOn('bad');
    const gc = new GroupCommit(r.commit, { windowMs: 60_000 });
    const e1 = gc.expect();
    const e2 = gc.expect();
    const a = gc.submit(['a']);
    const bad = gc.submit(['bad'], e1);
    const c = gc.submit(['c'], e2);
    await expect(bad).rejects.toThrow('bad bad');
    await Promise.all([a, c]);
    expect(r.groups).toEqual([['a', 'bad', 'c'], ['a'], ['bad'], ['c']]);
  });
});
