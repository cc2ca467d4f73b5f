import fsp, { type FileHandle } from 'node:fs/promises';
import { WorkerHash, type Digests } from './hash-pool.ts';

/**
 * With fsync: bytes written between early datasyncs. Each runs beside the writes, so the disk
 * works while the body still arrives and the final fdatasync (which alone makes the file durable)
 * has only the tail left, instead of the whole file.
 */
const EARLY_SYNC = 32 * 1024 * 1024;

/**
 * The write side of a large body: batches are hashed on a worker thread (hash-pool.ts) and written
 * with one writev in flight, so hashing, reading the socket and writing the file overlap; memory
 * stays at a few batches whatever the size.
 */
export class LargeFileSink {
  private readonly hash = new WorkerHash();
  private writing: Promise<void> = Promise.resolve();
  private syncing: Promise<void> | undefined;
  private unsynced = 0;
  private error: unknown;

  private constructor(
    private readonly fh: FileHandle,
    private readonly filePath: string,
    private readonly fsync: boolean,
  ) {}

  /** Creates the file (it must not exist). */
  static async open(filePath: string, fsync: boolean): Promise<LargeFileSink> {
    return new LargeFileSink(await fsp.open(filePath, 'wx', 0o600), filePath, fsync);
  }

  /** Hands a batch to the hasher and starts its write once the previous write is done. */
  async add(batch: Buffer[], length: number): Promise<void> {
    await this.hash.update(batch);
    await this.writing;
    this.check();
    const fail = (err: unknown) => void (this.error ??= err);
    this.writing = writevAll(this.fh, batch).then(() => {
      this.unsynced += length;
      if (!this.fsync || this.syncing || this.unsynced < EARLY_SYNC) return;
      this.unsynced = 0;
      this.syncing = this.fh.datasync().catch(fail).finally(() => (this.syncing = undefined));
    }, fail);
  }

  /** Waits for every write and returns the digests of all batches. */
  async finish(): Promise<Digests> {
    const digests = await this.hash.digest();
    await this.writing;
    await this.syncing;
    this.check();
    return digests;
  }

  /** fdatasync: the data and the size (what a reader needs); the directory entry is the caller's. */
  async sync(): Promise<void> {
    await this.fh.datasync();
  }

  /** Closes the file (never under a write or sync in flight); removes it unless it is kept. */
  async close(keep: boolean): Promise<void> {
    if (!keep) this.hash.abort();
    await this.writing;
    await this.syncing;
    await this.fh.close();
    if (!keep) await fsp.rm(this.filePath, { force: true });
  }

  private check(): void {
    if (this.error !== undefined) throw this.error;
  }
}

/** Writes every buffer at the file's current position, however the kernel splits the writes. */
export async function writevAll(fh: FileHandle, buffers: Buffer[]): Promise<void> {
  let rest = buffers;
  while (rest.length) {
    let { bytesWritten } = await fh.writev(rest);
    while (rest.length && bytesWritten >= rest[0]!.length) bytesWritten -= rest.shift()!.length;
    if (bytesWritten > 0) rest[0] = rest[0]!.subarray(bytesWritten);
  }
}
