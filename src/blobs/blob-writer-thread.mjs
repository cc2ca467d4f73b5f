// A blob writer thread (src/blobs/blob-writer.ts). Plain JavaScript on purpose: it loads nothing
// but node:fs and node:crypto, so the thread costs a few megabytes, not a copy of the app.
//
// Each request is one whole small blob: hash it, write it to a new temp file with O_DSYNC (the
// bytes and the size are on disk when the write returns), rename it to <root>/<aa>/<sha256> and
// fsync <aa>. The same steps and order as FsBlobStore.put, as plain system calls on this thread:
// the event loop sends one message and gets one answer instead of making five thread-pool calls.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parentPort } from 'node:worker_threads';

const { O_WRONLY, O_CREAT, O_EXCL, O_DSYNC } = fs.constants;
/**
 * fsync of a directory, opened by path each time (a quick call on this thread): a descriptor kept
 * open would still point at the old directory if the store's directory were replaced meanwhile.
 */
function fsyncDir(dir) {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function write(req) {
  const md5 = createHash('md5');
  const sha = createHash('sha256');
  const bytes = new Uint8Array(req.bytes);
  md5.update(bytes);
  sha.update(bytes);
  const sha256 = sha.digest('hex');
  const md5Base64 = md5.digest('base64');
  if (req.md5Base64 !== undefined && req.md5Base64 !== md5Base64) return { sha256, md5Base64, mismatch: 'checksum' };
  if (req.sha256Hex !== undefined && req.sha256Hex.toLowerCase() !== sha256) return { sha256, md5Base64, mismatch: 'sha256' };
  const fd = fs.openSync(req.tmp, O_WRONLY | O_CREAT | O_EXCL | O_DSYNC, 0o600);
  let placed = false;
  try {
    try {
      if (bytes.byteLength === 0) fs.fdatasyncSync(fd); // no write for O_DSYNC to apply to
      for (let at = 0; at < bytes.byteLength; ) at += fs.writeSync(fd, bytes, at);
    } finally {
      fs.closeSync(fd);
    }
    const dir = path.join(req.root, sha256.slice(0, 2));
    // An existing blob is replaced by identical bytes; either way the entry is synced below.
    fs.renameSync(req.tmp, path.join(dir, sha256));
    placed = true;
    fsyncDir(dir);
  } finally {
    if (!placed) fs.rmSync(req.tmp, { force: true });
  }
  return { sha256, md5Base64 };
}

// The bytes go back with the answer, moved, not copied: this thread allocates next to nothing, so its
// garbage collector seldom runs, and buffers freed here would hold memory long after their write.
parentPort.on('message', (req) => {
  try {
    parentPort.postMessage({ id: req.id, ...write(req), bytes: req.bytes }, [req.bytes]);
  } catch (err) {
    const error = { message: String(err?.message ?? err), code: err?.code, errno: err?.errno, syscall: err?.syscall, path: err?.path };
    parentPort.postMessage({ id: req.id, error, bytes: req.bytes }, [req.bytes]);
  }
});
