// `npx tsx bench/profile-window.ts FILE.cpuprofile FROM TO [TOP]`: where a thread's time went in one
// window of a V8 CPU profile, by function (self time), as a share of the window's samples. FROM and
// TO are seconds from the profile's start; a negative FROM or a TO of 0 or less counts from its
// end (`-8 -1` is the last eight seconds but one). A profile of a whole benchmark run averages its
// phases together; read by window it shows, say, the 100 KiB phase on its own. Profiles come from
// `SERVE_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR --cpu-prof-interval=500" npm run bench:smtp`
// (docs/bench-smtp.md); the event loop's file is the one numbered .001.
import fs from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [file, fromArg, toArg, topArg] = process.argv.slice(2);
if (!file || fromArg === undefined || toArg === undefined) {
  console.error('usage: npx tsx bench/profile-window.ts FILE.cpuprofile FROM TO [TOP]');
  process.exit(2);
}
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const seconds = (profile.endTime - profile.startTime) / 1e6;
const from = Number(fromArg) < 0 ? seconds + Number(fromArg) : Number(fromArg);
const to = Number(toArg) <= 0 ? seconds + Number(toArg) : Number(toArg);
if (!(from >= 0 && to > from)) {
  console.error(`the window ${fromArg}..${toArg} is empty in a profile of ${seconds.toFixed(1)} s`);
  process.exit(2);
}

// The compiled tree's cache folder and node_modules say little; keep the path from src/ or the package on.
const shortUrl = (url: string) => url.replace(/.*node_modules\/(?:\.cache\/cubby\/[0-9a-f]+\/)?/, '').replace(/^file:\/\/.*?\/src\//, 'src/');

const self = new Map<string, number>();
let total = 0;
let idle = 0;
let at = profile.startTime;
profile.samples.forEach((id, i) => {
  at += profile.timeDeltas[i]!;
  const s = (at - profile.startTime) / 1e6;
  if (s < from || s > to) return;
  total++;
  const frame = byId.get(id)!.callFrame;
  if (frame.functionName === '(idle)') return void idle++;
  const where = frame.url ? ` ${shortUrl(frame.url)}:${frame.lineNumber + 1}` : '';
  const key = `${frame.functionName || '(anonymous)'}${where}`;
  self.set(key, (self.get(key) ?? 0) + 1);
});
if (!total) {
  console.error('no samples in that window');
  process.exit(1);
}
console.log(`${file}: ${from.toFixed(1)}–${to.toFixed(1)} s of ${seconds.toFixed(1)}; ${total} samples, idle ${((100 * idle) / total).toFixed(1)} %`);
const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(topArg ?? 30));
for (const [key, n] of top) console.log(`${((100 * n) / total).toFixed(2).padStart(6)} %  ${key}`);
