// The program's TypeScript compiled to plain JavaScript ahead of running, kept in a cache folder
// and rebuilt when a source file changes. Why: through tsx's loader every process (and every
// analysis thread) carries a loader thread with its own V8 heap and every module's transformed
// source; a server started from the compiled tree uses about 70 MB less memory, idle and under
// load, and starts faster. Nothing to run by hand: `bin/cubby.js` calls compiledTree() and falls
// back to tsx when the tree cannot be built or written (a read-only install, no esbuild).
//
// The tree mirrors the repository: <cache>/<stamp>/src/… and packages/sdk/src/…, each .ts file as
// a .js file beside a source map, every other file copied, and the repository's package.json
// (its "type": "module" and its version, which src/version.ts reads), and a link to its
// node_modules. Relative specifiers that name a .ts file ('../db/schema.ts', the analysis thread's
// URL) are rewritten to .js.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SOURCE_DIRS = ['src', 'packages/sdk/src'];
/** Bumped when the way the tree is built changes, so older trees are not reused. */
const FORMAT = 2;
const KEEP_MS = 24 * 3600_000;
/** A tree's folder name, or a partial build's: the only names pruning may remove. */
const TREE_NAME = /^[0-9a-f]{20}(\.partial-\d+-[0-9a-f]{8})?$/;

/** The cache folder: CUBBY_BUILD_DIR, else node_modules/.cache/cubby (npm ci starts it afresh). */
function cacheDir(env = process.env, root = ROOT) {
  return env.CUBBY_BUILD_DIR ? path.resolve(env.CUBBY_BUILD_DIR) : path.join(root, 'node_modules', '.cache', 'cubby');
}

function listSources(root) {
  const out = [];
  const walk = (rel) => {
    for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const child = `${rel}/${entry.name}`;
      if (entry.isDirectory()) walk(child);
      else if (entry.isFile()) out.push(child);
    }
  };
  for (const dir of SOURCE_DIRS) if (fs.existsSync(path.join(root, dir))) walk(dir);
  return out.sort();
}

/**
 * Names the sources as they are now: any added, removed or edited file gives a new stamp, and so
 * does another checkout sharing the cache folder (its tree links its own node_modules).
 */
function stampOf(root, files, esbuildVersion) {
  const hash = crypto.createHash('sha256').update(`${FORMAT}\0${esbuildVersion}\0${process.versions.node}\0${root}\0`);
  for (const rel of ['package.json', 'tsconfig.json', ...files]) {
    if (!fs.existsSync(path.join(root, rel))) continue;
    const st = fs.statSync(path.join(root, rel));
    hash.update(`${rel}\0${st.size}\0${st.mtimeMs}\0`);
  }
  return hash.digest('hex').slice(0, 20);
}

/** '../x.ts' → '../x.js' in string literals of compiled code (esbuild prints them double-quoted). */
export function rewriteSpecifiers(code) {
  return code.replace(/"(\.{1,2}\/[^"\s]*?)\.ts"/g, '"$1.js"');
}

async function build(root, files, into, esbuild) {
  // The repository's compiler options, as tsx passes them (class fields, JSX and the like).
  const tsconfigRaw = fs.existsSync(path.join(root, 'tsconfig.json')) ? fs.readFileSync(path.join(root, 'tsconfig.json'), 'utf8') : undefined;
  const pending = [];
  for (const rel of files) {
    const from = path.join(root, rel);
    fs.mkdirSync(path.dirname(path.join(into, rel)), { recursive: true });
    if (!rel.endsWith('.ts')) {
      fs.copyFileSync(from, path.join(into, rel));
      continue;
    }
    const out = path.join(into, rel.slice(0, -3) + '.js');
    pending.push(
      esbuild
        .transform(fs.readFileSync(from, 'utf8'), { loader: 'ts', format: 'esm', target: 'node20', tsconfigRaw, sourcemap: 'external', sourcefile: from, sourcesContent: false })
        .then(({ code, map }) => {
          fs.writeFileSync(out, `${rewriteSpecifiers(code)}//# sourceMappingURL=${path.basename(out)}.map\n`);
          fs.writeFileSync(`${out}.map`, map);
        }),
    );
  }
  await Promise.all(pending);
  fs.copyFileSync(path.join(root, 'package.json'), path.join(into, 'package.json'));
  // Packages resolve from the tree's own folder up: outside the repository (CUBBY_BUILD_DIR) they
  // would not be found without this link to its node_modules.
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(into, 'node_modules'), 'dir');
}

/**
 * Removes trees (and abandoned partial builds) not used for a day; never the current one, and
 * nothing else that may share the folder (CUBBY_BUILD_DIR may name any folder).
 */
function prune(dir, keep) {
  for (const name of fs.readdirSync(dir)) {
    if (name === keep || !TREE_NAME.test(name)) continue;
    const full = path.join(dir, name);
    try {
      if (Date.now() - fs.statSync(full).mtimeMs > KEEP_MS) fs.rmSync(full, { recursive: true, force: true });
    } catch {
      // another process pruned it first
    }
  }
}

/**
 * The compiled tree's folder, built first if the sources changed since; null when it cannot be
 * had (then the caller runs the sources through tsx). Concurrent callers may build at once: each
 * writes its own partial folder and renames it into place; the first rename wins and the others
 * use its tree. `root` is the repository (tests: a small one of their own); `opts.onFallback`
 * hears why there is no tree.
 */
export async function compiledTree(env = process.env, root = ROOT, opts = {}) {
  if (env.CUBBY_RUNTIME === 'tsx') return null;
  try {
    const { default: esbuild } = await import('esbuild');
    const files = listSources(root);
    const dir = cacheDir(env, root);
    const stamp = stampOf(root, files, esbuild.version);
    const tree = path.join(dir, stamp);
    if (fs.existsSync(path.join(tree, 'package.json'))) {
      markUsed(tree);
      return tree;
    }
    fs.mkdirSync(dir, { recursive: true });
    const partial = path.join(dir, `${stamp}.partial-${process.pid}-${crypto.randomBytes(4).toString('hex')}`);
    try {
      try {
        await build(root, files, partial, esbuild);
      } finally {
        await esbuild.stop(); // its service process would otherwise live as long as this one
      }
      fs.renameSync(partial, tree);
    } catch (err) {
      fs.rmSync(partial, { recursive: true, force: true });
      // Another process renamed its copy first: use that one.
      if (!['ENOTEMPTY', 'EEXIST'].includes(err.code) || !fs.existsSync(path.join(tree, 'package.json'))) throw err;
    }
    prune(dir, stamp);
    return tree;
  } catch (err) {
    if (env.CUBBY_RUNTIME === 'compiled') throw err;
    opts.onFallback?.(err);
    return null;
  }
}

/**
 * Keeps `tree` from being pruned while this process runs (a server up for days would otherwise
 * lose it to a build after a `git pull`, and could not start a thread from it afterwards).
 */
export function keepFresh(tree) {
  setInterval(() => markUsed(tree), 3600_000).unref();
}

/** Marks `tree` as in use now: pruning keeps trees used within a day. */
function markUsed(tree) {
  try {
    const now = new Date();
    fs.utimesSync(tree, now, now);
  } catch {
    // built by another user (an image, an install step): not ours to touch, nor to prune
  }
}
